"""The weighted squared loss that WRMF, RG² and RG× minimise, and its two half-step systems.

    L(P, Q) = Σ_{x,y} W_xy (S_xy − P_x·Q_y)² − Σ_x V_x ‖Q P_xᵀ‖² + Σ_x ρ_x ‖P_x‖² + Σ_y σ_y ‖Q_y‖²

over all M×N pairs, with weights that depend on the user (context) x and on whether (x, y) is observed:
W_xy = a_x + c_xy r_xy and S_xy = s0 + (s1_xy − s0) r_xy (r the binary training matrix). This is the RG paper's
Eq. 31 (V = 0 for RG² and WRMF) with its row-weighted regulariser of Eq. 36–39; WRMF (Hu et al. 2008) is
a = 1, c = α, s0 = 0, s1 = 1, V = 0, ρ = σ = λ. Only observed entries are stored: the unobserved part enters
through the Gramians QᵀQ and Pᵀ diag(a − V) P, so the loss and both systems cost O(|D| d + (M + N) d²).
A row with no observed entry and a zero right-hand side is set to zero (its minimiser; implicit does the same).

`item_negative_target` (default: s0) replaces s0 in the item half-step's shared term s0 Σ_x a_x P_x only: the RG
authors' code adds +Σ_x a_x P_x there while its user half-step has s0 = −1, so its item half-step minimises L with
that one sign flipped, not L (recx.models.als.rg, form official).

The loss after a half-step needs no pass of its own where the solves hold it: with the other side fixed, row r's
part of L is ℓ_r(x) = xᵀA_r x − 2 b^L_r·x + C_r (A_r, b_r its system below, b^L_r with L's own s0, C_r = Σ_y W S²
over its pairs), and a CG residual ρ_r = b_r − A_r x gives xᵀA_r x = x·(b_r − ρ_r), so ℓ_r = C_r − held_r with
held_r = Σ_{e} e_e (Y_e · x) + ρ_r · x + (2 h^L_r − h_r)(v · x) (recx.kernels.conjugate_gradient sums it beside its steps),
and L = K − Σ_r held_r + the other side's ridge, K = Σ_r C_r = N s0² Σ_x a_x + Σ_obs ((a_x + c) s1² − a_x s0²).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from recx.core.device_paths import accelerator_branch
from recx.data.csr import CSR
from recx.models.als.layout import ACCELERATOR_GATHERED, Chunk, chunk_budget, padded_chunks
from recx.models.als.solve import RowSystem

LOSS_CHUNK = 1 << 18  # observed entries scored at once when evaluating the loss (host branch)


def loss_chunk(factors: torch.Tensor) -> int:
    """Observed entries the loss scores at once: LOSS_CHUNK on the host branch; on the accelerator branch, where a
    chunk costs its ~15 launches whatever its size, as many as keep its gathered rows within ACCELERATOR_GATHERED
    elements."""
    return max(LOSS_CHUNK, ACCELERATOR_GATHERED // factors.shape[1]) if accelerator_branch(factors) else LOSS_CHUNK


@dataclass
class Side:
    """One side's view of the training matrix: its rows' entries in its CSR order."""

    indptr: torch.Tensor
    neighbours: torch.Tensor  # the other side's id of each entry
    entry: torch.Tensor  # each entry's position in the user-major order
    _chunks: dict[tuple[int, int], list[Chunk]] = field(default_factory=dict, repr=False)

    @property
    def lengths(self) -> torch.Tensor:
        return self.indptr[1:] - self.indptr[:-1]

    def chunks(self, rows: torch.Tensor) -> list[Chunk]:
        """The exact solver's padded chunks of this side's rows for the factors `rows` [R, d] (their budget:
        recx.models.als.layout.chunk_budget), built on first use."""
        budget = chunk_budget(rows)
        if budget not in self._chunks:
            self._chunks[budget] = padded_chunks(self.indptr, *budget)
        return self._chunks[budget]


def user_and_item_sides(train: CSR) -> tuple[Side, Side]:
    users = train.row_ids()
    item_major = torch.argsort(train.indices * train.n_rows + users)
    item_indptr = torch.zeros(train.n_cols + 1, dtype=torch.int64, device=users.device)
    item_indptr[1:] = torch.cumsum(train.column_counts(), 0)
    by_user = Side(train.indptr, train.indices, torch.arange(train.nnz, device=users.device))
    by_item = Side(item_indptr, users[item_major], item_major)
    return by_user, by_item


@dataclass
class WeightedSquares:
    """The loss above for one training matrix; per-user arrays [M], per-item [N], per-entry [nnz] (user-major)."""

    train: CSR
    base_weight: torch.Tensor  # a [M]
    extra_weight: torch.Tensor  # c [nnz]
    negative_target: float  # s0
    positive_target: torch.Tensor  # s1 [nnz]
    interaction: torch.Tensor  # V [M]
    user_ridge: torch.Tensor  # ρ [M]
    item_ridge: torch.Tensor  # σ [N]
    users: Side
    items: Side
    uniform_users: bool = False  # every user row has the same g and μ (checked once, at build)
    uniform_items: bool = False
    item_negative_target: float | None = None  # s0 in the item half-step's shared term; None: s0

    @staticmethod
    def build(
        train: CSR,
        base_weight,
        extra_weight,
        negative_target,
        positive_target,
        interaction,
        user_ridge,
        item_ridge,
        item_negative_target: float | None = None,
    ) -> WeightedSquares:
        by_user, by_item = user_and_item_sides(train)
        same = lambda values: bool((values == values[:1]).all())  # noqa: E731
        return WeightedSquares(
            train,
            base_weight,
            extra_weight,
            negative_target,
            positive_target,
            interaction,
            user_ridge,
            item_ridge,
            by_user,
            by_item,
            same(base_weight - interaction) and same(user_ridge),
            same(item_ridge),
            item_negative_target,
        )

    @cached_property
    def target_weight(self) -> torch.Tensor:
        """e_xy = W_xy S_xy − a_x s0 on observed entries: each entry's part of b beyond the shared a_x s0 Σ Q."""
        base = self.base_weight[self.train.row_ids()]
        return (base + self.extra_weight) * self.positive_target - base * self.negative_target

    def user_system(self, items: torch.Tensor) -> RowSystem:
        """P half-step: A_x = (a_x − V_x) QᵀQ + Σ_{y∈I_x} c_xy Q_yQ_yᵀ + ρ_x I, b_x = a_x s0 Σ_y Q_y + Σ e_xy Q_y."""
        side = self.users
        return RowSystem(
            side.indptr,
            items,
            items.T @ items,
            self.base_weight - self.interaction,
            self.user_ridge,
            self.base_weight * self.negative_target,
            items.sum(0),
            side.neighbours,
            self.extra_weight,
            self.target_weight,
            (side.lengths == 0) & (self.base_weight * self.negative_target == 0),
            self.uniform_users,
        )

    @cached_property
    def item_major_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(c, e) in the item-major order of the entries."""
        return self.extra_weight[self.items.entry], self.target_weight[self.items.entry]

    def item_system(self, users: torch.Tensor) -> RowSystem:
        """Q half-step: A_y = Pᵀ diag(a − V) P + Σ_{x∈U_y} c_xy P_xP_xᵀ + σ_y I, b_y = s0 Σ_x a_x P_x + Σ e_xy P_x
        (s0 here: `item_negative_target` when set)."""
        side, n_items = self.items, self.item_ridge.numel()
        s0 = self.negative_target if self.item_negative_target is None else self.item_negative_target
        ones = torch.ones(n_items, dtype=users.dtype, device=users.device)
        gram = users.T @ ((self.base_weight - self.interaction)[:, None] * users)
        return RowSystem(
            side.indptr,
            users,
            gram,
            ones,
            self.item_ridge,
            ones * s0,
            self.base_weight @ users,
            side.neighbours,
            *self.item_major_weights,
            (side.lengths == 0) & (s0 == 0),
            self.uniform_items,
            None if s0 == self.negative_target else ones * self.negative_target,
        )

    @cached_property
    def constant(self) -> float:
        """K = Σ_{x,y} W_xy S_xy² = N s0² Σ_x a_x + Σ_obs ((a_x + c_xy) s1_xy² − a_x s0²), in float64 (numpy's
        pairwise sums: the same for any thread count)."""
        numpy = lambda tensor: tensor.detach().cpu().double().numpy()  # noqa: E731
        base, s0 = numpy(self.base_weight), self.negative_target
        observed = base[numpy(self.train.row_ids()).astype(np.int64)]
        entries = (observed + numpy(self.extra_weight)) * numpy(self.positive_target) ** 2 - observed * s0 * s0
        return float(self.item_ridge.numel() * s0 * s0 * base.sum() + entries.sum())

    def loss_from_held(self, held: np.ndarray, other: torch.Tensor, other_ridge: torch.Tensor) -> torch.Tensor:
        """L = K − Σ_r held_r + Σ_j σ_j ‖Y_j‖² after a half-step whose solves held `held` [R] (module docstring),
        Y `other` the fixed side's factors and σ `other_ridge` its ridge; a 0-d float64 tensor on Y's device."""
        norms = other.pow(2).sum(1).double().cpu().numpy()
        ridge = other_ridge.double().cpu().numpy()
        total = self.constant - held.sum() + (ridge * norms).sum()
        return torch.tensor(total, dtype=torch.float64, device=other.device)

    @torch.no_grad()
    def loss(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """L(P, Q) in float64, a 0-d tensor on the factors' device (no host sync)."""
        f64 = torch.float64
        n_items = items.shape[0]
        gram = items.T @ items
        quadratic = ((users @ gram) * users).sum(1).to(f64)  # ‖Q P_xᵀ‖²
        mean_part = (users @ items.sum(0)).to(f64)  # P_x · Σ_y Q_y
        a, s0 = self.base_weight.to(f64), self.negative_target
        total = (a * (n_items * s0 * s0 - 2 * s0 * mean_part + quadratic)).sum()
        total = total - (self.interaction.to(f64) * quadratic).sum()
        row_ids, chunk = self.train.row_ids(), loss_chunk(users)
        for start in range(0, self.train.nnz, chunk):
            part = slice(start, start + chunk)
            rows, cols = row_ids[part], self.train.indices[part]
            scores = (users[rows] * items[cols]).sum(1).to(f64)
            base = a[rows]
            observed = base + self.extra_weight[part].to(f64)
            total = (
                total
                + (observed * (self.positive_target[part].to(f64) - scores) ** 2 - base * (s0 - scores) ** 2).sum()
            )
        total = total + (self.user_ridge.to(f64) * users.pow(2).sum(1).to(f64)).sum()
        return total + (self.item_ridge.to(f64) * items.pow(2).sum(1).to(f64)).sum()
