"""Optimizers, chosen by the run config's `optimizer` key.

- `adam`: exact dense Adam (Kingma & Ba 2015; the papers' optimizer): every row of every table moves every step
  (moments decay on rows without gradient), and `weight_decay_mode: full` decays every row every step.
- `lazy_adam`: Adam on the rows a step touches only (TensorFlow's LazyAdam, torch's SparseAdam): for touched rows r,
      m_r ← β1 m_r + (1-β1) g_r,  v_r ← β2 v_r + (1-β2) g_r²,  θ_r ← θ_r - lr m̂_r / (√v̂_r + ε),
  m̂ = m / (1 - β1^t), v̂ = v / (1 - β2^t), t the number of steps taken; untouched rows and their moments stay.
- `adagrad` (Duchi et al. 2011), touched rows only: s_r ← s_r + g_r², θ_r ← θ_r - lr g_r / (√s_r + ε).
- `rowwise_adagrad`, touched rows only, one accumulator per row (Caffe2's RowWiseSparseAdagrad, FBGEMM's rowwise
  Adagrad for embedding tables): s_r ← s_r + mean_j g_rj², θ_r ← θ_r - lr g_r / (√s_r + ε). Its state is a scalar
  per row, so a step reads and writes d times less optimizer state than `adagrad`.
- `sgd`, touched rows only: θ_r ← θ_r - lr g_r (equal to dense SGD on those rows; other rows have zero gradient).

A row-sparse gradient is a sparse COO tensor (embedding tables read with `F.embedding(..., sparse=True)`); its
touched rows are its indices (duplicates summed). A dense gradient touches every row. On CUDA the row-sparse updates
never read the number of distinct rows, so a step issues no host sync (see `RowSparseOptimizer._touched_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from recx.core.device_paths import accelerator_branch
from recx.core.errors import RecxError

OPTIMIZERS = ("adam", "lazy_adam", "adagrad", "rowwise_adagrad", "sgd")
ROW_SPARSE = ("lazy_adam", "adagrad", "rowwise_adagrad", "sgd")


class DenseAdam(torch.optim.Adam):
    """torch's Adam (fused kernel where the device has one); sparse gradients are made dense first."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None and param.grad.is_sparse:
                    param.grad = param.grad.to_dense()
        return super().step(closure)


class RowSparseOptimizer(torch.optim.Optimizer):
    """Applies `update(param, touched, grad, state, group)` to the rows a gradient touches (`TouchedRows`; its ids
    are None for a dense gradient: every row).

    `sync_free` (default: on CUDA) sums repeated rows without learning how many distinct rows there are."""

    sync_free: bool | None = None

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if param.grad.is_sparse:
                    sync_free = accelerator_branch(param) if self.sync_free is None else self.sync_free
                    rows, grad = self._touched_rows(param.grad, state, sync_free)
                    touched = TouchedRows(rows, distinct=not sync_free)
                else:
                    touched, grad = TouchedRows(None, distinct=True), param.grad
                self.update(param, touched, grad, state, group)

    @staticmethod
    def _touched_rows(sparse: torch.Tensor, state: dict, sync_free: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(row ids, their summed gradient rows) of the sparse gradient `sparse`. Distinct rows unless `sync_free`; then, since the
        number of distinct rows would need a host sync, rows are summed in a zero buffer that is reset after, and a
        row listed twice carries the same summed gradient both times (and is written twice with the same value)."""
        rows, values = sparse._indices()[0], sparse._values()
        if not sync_free:  # torch.unique + index_add_: the same sums as coalesce(), in about half its time on a CPU
            distinct, position = torch.unique(rows, return_inverse=True)
            return distinct, values.new_zeros((distinct.numel(), *values.shape[1:])).index_add_(0, position, values)
        if "buffer" not in state:
            state["buffer"] = values.new_zeros(sparse.shape)
        buffer = state["buffer"]
        buffer.index_add_(0, rows, values)
        grad = buffer.index_select(0, rows)
        buffer.index_fill_(0, rows, 0.0)
        return rows, grad

    def update(self, param, touched: "TouchedRows", grad, state, group) -> None:
        raise NotImplementedError


class TouchedRows:
    """The rows a step updates: `ids` (None: every row), listed once each when `distinct` (else a repeated id
    carries the same values every time it is listed, so a write of new values is idempotent but an add is not)."""

    def __init__(self, ids: torch.Tensor | None, distinct: bool):
        self.ids, self.distinct = ids, distinct

    def read(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if self.ids is None else tensor.index_select(0, self.ids)

    def write(self, tensor: torch.Tensor, values: torch.Tensor) -> None:
        if self.ids is None:
            if values is not tensor:
                tensor.copy_(values)
        else:
            tensor.index_copy_(0, self.ids, values)

    def add(self, tensor: torch.Tensor, delta: torch.Tensor) -> None:
        """tensor[ids] += delta: an in-place add on distinct rows (no read of the old rows), else a write."""
        if self.ids is None:
            tensor.add_(delta)
        elif self.distinct:
            tensor.index_add_(0, self.ids, delta)
        else:
            self.write(tensor, self.read(tensor) + delta)


class RowSparseSGD(RowSparseOptimizer):
    def __init__(self, params, lr: float):
        super().__init__(params, {"lr": lr})

    def update(self, param, touched, grad, state, group) -> None:
        touched.add(param, grad * -group["lr"])


class RowSparseAdagrad(RowSparseOptimizer):
    def __init__(self, params, lr: float, eps: float = 1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    def update(self, param, touched, grad, state, group) -> None:
        if "sum" not in state:
            state["sum"] = torch.zeros_like(param)
        grad_squared = grad * grad
        squares = touched.read(state["sum"]) + grad_squared
        touched.add(state["sum"], grad_squared)
        touched.add(param, grad.div(squares.sqrt_().add_(group["eps"])).mul_(-group["lr"]))


class RowwiseAdagrad(RowSparseOptimizer):
    """Adagrad with one accumulator per row (a 1-D parameter's rows are its elements)."""

    def __init__(self, params, lr: float, eps: float = 1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    def update(self, param, touched, grad, state, group) -> None:
        if "sum" not in state:
            state["sum"] = param.new_zeros(param.shape[:1])
        row_squares = grad.pow(2).flatten(1).mean(1) if grad.dim() > 1 else grad * grad
        squares = touched.read(state["sum"]) + row_squares
        touched.add(state["sum"], row_squares)
        step = squares.sqrt_().add_(group["eps"]).reciprocal_().mul_(-group["lr"])
        touched.add(param, grad * step.view(grad.shape[:1] + (1,) * max(grad.dim() - 1, 0)))


class LazyAdam(RowSparseOptimizer):
    """The touched rows of the moments are gathered and updated by torch's fused Adam kernel (the one
    `torch.optim.Adam(fused=True)` runs; one pass instead of a dozen elementwise operations) applied to a zero
    parameter, which leaves the step's change in it; the moments are written back and the change added to the rows."""

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    def update(self, param, touched, grad, state, group) -> None:
        if "step" not in state:
            state.update(
                step=torch.zeros((), dtype=torch.float32, device=param.device),
                exp_avg=torch.zeros_like(param),
                exp_avg_sq=torch.zeros_like(param),
            )
        state["step"] += 1
        first, second = touched.read(state["exp_avg"]), touched.read(state["exp_avg_sq"])
        change = torch.zeros_like(grad)
        beta1, beta2 = group["betas"]
        torch._fused_adam_(
            [change],
            [grad],
            [first],
            [second],
            [],
            [state["step"]],
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=0.0,
            eps=group["eps"],
            amsgrad=False,
            maximize=False,
        )
        touched.write(state["exp_avg"], first)
        touched.write(state["exp_avg_sq"], second)
        touched.add(param, change)


def make_optimizer(
    name: str,
    params: list[torch.nn.Parameter],
    lr: float,
    weight_decay: float = 0.0,
    extra_params: Sequence[torch.nn.Parameter] = (),
) -> torch.optim.Optimizer:
    """The optimizer `name` over `params` (decayed by `weight_decay` every step, dense Adam only) and
    `extra_params` (never decayed: a loss's own parameters)."""
    if name not in OPTIMIZERS:
        raise RecxError(f"optimizer {name!r}; valid: {', '.join(OPTIMIZERS)}")
    if name == "adam":
        groups = [{"params": list(params), "weight_decay": weight_decay}]
        if extra_params:
            groups.append({"params": list(extra_params), "weight_decay": 0.0})
        return DenseAdam(groups, lr=lr, fused=True)
    if weight_decay:
        raise RecxError(
            f"optimizer {name!r} updates only the rows a step touches, so it cannot decay every row "
            f"every step (weight_decay_mode 'full'); use optimizer 'adam' or weight_decay_mode 'batch'"
        )
    everything = list(params) + list(extra_params)
    return {"lazy_adam": LazyAdam, "adagrad": RowSparseAdagrad, "rowwise_adagrad": RowwiseAdagrad, "sgd": RowSparseSGD}[
        name
    ](everything, lr=lr)
