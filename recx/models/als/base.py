"""Models trained by alternating closed-form solves (runner `alternating`): user factors P, item factors Q.

score(x, y) = P_x · Q_y. A subclass states its weighted squared loss (recx.models.als.problem) for a training
matrix; the runner (recx.training.runners.alternating) alternates the user and item half-steps. Factors start
uniform in [0, init_scale) (the RG paper's Algorithm 1, line 3; implicit's 0.01), or with `init: normal` from
N(0, init_std²) as the RG authors' RecStudio code (`init_method: normal`, its normal_initialization's 0.02).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from recx.core.args import arg
from recx.data.csr import CSR
from recx.models.als.problem import Side, WeightedSquares
from recx.models.als.solve import SOLVERS, RowSystem, solve_rows
from recx.models.base import Model

DTYPES = {"float32": torch.float32, "float64": torch.float64}
INITS = ("uniform", "normal")


@dataclass
class AlternatingArgs:
    """solver cg (implicit's conjugate gradient, `cg_steps` steps) | cholesky (exact); dtype float32 | float64."""

    regularization: float = arg(0.05, at_least=0, help="λ of the ridge term")
    solver: str = arg("cg", choices=SOLVERS, help="conjugate gradient (implicit's), or exact Cholesky")
    cg_steps: int = arg(3, at_least=1, at_most=1_000, help="conjugate gradient steps per row and half-step")
    dtype: str = arg("float32", choices=tuple(DTYPES), help="the factors' and solves' precision")
    init_scale: float = arg(0.01, above=0, help="factors start uniform in [0, init_scale)")
    init: str = arg(
        "uniform", choices=INITS, help="uniform in [0, init_scale), or normal(0, init_std) (RecStudio)", added=True
    )
    init_std: float = arg(0.02, above=0, help="the normal start's standard deviation (RecStudio's 0.02)", added=True)


class AlternatingModel(Model):
    runner = "alternating"
    losses = ()
    optimizers = ()
    runner_note = "closed-form alternating solves (no optimizer, no sampler)"
    alternates = True
    row_queries = True  # the user's row of the factors
    ordered_examples = False
    Args = AlternatingArgs

    def __init__(self, n_users: int, n_items: int, dim: int, args: AlternatingArgs, dataset=None):
        super().__init__()
        self.n_users, self.n_items, self.args = n_users, n_items, args
        dtype = DTYPES[args.dtype]

        def start(rows: int) -> torch.Tensor:
            if args.init == "normal":
                return torch.randn(rows, dim, dtype=dtype) * args.init_std
            return torch.rand(rows, dim, dtype=dtype) * args.init_scale

        self.user_factors = nn.Parameter(start(n_users), requires_grad=False)
        self.item_factors = nn.Parameter(start(n_items), requires_grad=False)

    def weighted_squares(self, train: CSR) -> WeightedSquares:
        """The loss this model minimises on `train` (on the factors' device and dtype)."""
        raise NotImplementedError

    def representations(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.user_factors[users], self.item_factors

    def embedding_tables(self) -> list[nn.Parameter]:
        return [self.user_factors, self.item_factors]

    def solve(self, rows: torch.Tensor, system: RowSystem, side: Side):
        """`solve_rows` with this model's solver; the exact solver's chunks are those of `side` for `rows`."""
        chunks = side.chunks(rows) if self.args.solver == "cholesky" else []
        return solve_rows(rows, system, chunks, self.args.solver, self.args.cg_steps)

    @torch.no_grad()
    def solve_users(self, problem: WeightedSquares) -> torch.Tensor:
        """P ← argmin_P L(P, Q): the user half-step; returns L(P, Q) after it (0-d, float64), from what the solves
        held where they hold it (recx.models.als.problem)."""
        users, items = self.user_factors.data, self.item_factors.data
        held = self.solve(users, problem.user_system(items), problem.users)
        return problem.loss(users, items) if held is None else problem.loss_from_held(held, items, problem.item_ridge)

    @torch.no_grad()
    def solve_items(self, problem: WeightedSquares) -> torch.Tensor:
        """Q ← argmin_Q L(P, Q): the item half-step; returns L(P, Q) after it, as `solve_users`."""
        users, items = self.user_factors.data, self.item_factors.data
        held = self.solve(items, problem.item_system(users), problem.items)
        return problem.loss(users, items) if held is None else problem.loss_from_held(held, users, problem.user_ridge)

    def loss(self, problem: WeightedSquares) -> torch.Tensor:
        return problem.loss(self.user_factors.data, self.item_factors.data)
