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

import numpy as np
import torch

from recx.core.device_paths import accelerator_branch
from recx.core.errors import RecxError
from recx.kernels import optimizer_rows
from recx.kernels.row_occurrences import slot_scratch

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
    """Applies the optimizer's rule to the rows a gradient touches.

    A row-sparse gradient on the host branch goes to `kernel_step`, the optimizer's compiled kernel
    (recx.kernels.optimizer_rows: repeated rows summed in listing order, then each distinct row updated). On the
    accelerator branch (CUDA, or `sync_free` set) it goes to `update` with repeated rows summed in a zero buffer that
    is reset after, without learning how many distinct rows there are (no host sync). A dense gradient goes to
    `update` with every row."""

    sync_free: bool | None = None
    _listed: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = ()

    @torch.no_grad()
    def step(self, closure=None):
        listed, self._listed = self._listed, ()
        for param, rows, values in listed:
            group = next(group for group in self.param_groups if any(p is param for p in group["params"]))
            self._kernel_rows(param, rows, values, group)
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state, grad = self.state[param], param.grad
                if not grad.is_sparse:
                    self.update(param, TouchedRows(None), grad, state, group)
                elif accelerator_branch(param) if self.sync_free is None else self.sync_free:
                    rows, summed = self._summed_rows(grad, state)
                    self.update(param, TouchedRows(rows), summed, state, group)
                else:
                    self._kernel_rows(param, grad._indices()[0], grad._values(), group)

    def step_rows(self, listed: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> None:
        """One step on row-sparse gradients a step computed itself: for each (param, rows [n], values [n, ...]) of
        CPU parameters of this optimizer, what `step` does with the sparse gradient that F.embedding(rows, param,
        sparse=True) receives (repeated rows summed in listing order). Goes through `step`, so its hooks (an LR
        scheduler's count among them) see the step."""
        self._listed = listed
        self.step()

    def _kernel_rows(self, param: torch.Tensor, rows: torch.Tensor, values: torch.Tensor, group: dict) -> None:
        grad = _rows_of(values.contiguous())
        self.kernel_step(rows.numpy(), grad, slot_scratch(param.shape[0]), param, self.state[param], group)

    @staticmethod
    def _summed_rows(sparse: torch.Tensor, state: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(row ids as listed, each listed row's summed gradient) of the sparse gradient `sparse`: a row listed twice
        carries the same summed gradient both times."""
        rows, values = sparse._indices()[0], sparse._values()
        if "buffer" not in state:
            state["buffer"] = values.new_zeros(sparse.shape)
        buffer = state["buffer"]
        buffer.index_add_(0, rows, values)
        grad = buffer.index_select(0, rows)
        buffer.index_fill_(0, rows, 0.0)
        return rows, grad

    def update(self, param, touched: "TouchedRows", grad, state, group) -> None:
        raise NotImplementedError

    def kernel_step(self, rows: np.ndarray, values: np.ndarray, slot: np.ndarray, param, state, group) -> None:
        """The compiled step: `rows` [n] and `values` [n, d] numpy views of the gradient, `slot` the scratch
        (recx.kernels.row_occurrences), `param` the parameter (its kernel view: `_rows_of`); the kernel's scalars are
        cast to the gradient's dtype."""
        raise NotImplementedError


def _rows_of(tensor: torch.Tensor) -> np.ndarray:
    """A [N, d] numpy view of a parameter, state or gradient tensor (torch's view raises rather than copy)."""
    tensor = tensor.detach()
    return tensor.numpy() if tensor.dim() == 2 else tensor.view(tensor.shape[0], -1).numpy()


class TouchedRows:
    """The rows a step updates: `ids` (None: every row). A repeated id carries the same values every time it is
    listed, so a write of new values is idempotent but an add is not."""

    def __init__(self, ids: torch.Tensor | None):
        self.ids = ids

    def read(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if self.ids is None else tensor.index_select(0, self.ids)

    def write(self, tensor: torch.Tensor, values: torch.Tensor) -> None:
        if self.ids is None:
            if values is not tensor:
                tensor.copy_(values)
        else:
            tensor.index_copy_(0, self.ids, values)

    def add(self, tensor: torch.Tensor, delta: torch.Tensor) -> None:
        """tensor[ids] += delta, as a write of the new rows when ids are listed."""
        if self.ids is None:
            tensor.add_(delta)
        else:
            self.write(tensor, self.read(tensor) + delta)


class RowSparseSGD(RowSparseOptimizer):
    def __init__(self, params, lr: float):
        super().__init__(params, {"lr": lr})

    def update(self, param, touched, grad, state, group) -> None:
        touched.add(param, grad * -group["lr"])

    def kernel_step(self, rows, values, slot, param, state, group) -> None:
        optimizer_rows.sgd_step(rows, values, slot, _rows_of(param), values.dtype.type(group["lr"]))


class RowSparseAdagrad(RowSparseOptimizer):
    def __init__(self, params, lr: float, eps: float = 1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @staticmethod
    def _squares(param, state) -> torch.Tensor:
        if "sum" not in state:
            state["sum"] = torch.zeros_like(param)
        return state["sum"]

    def update(self, param, touched, grad, state, group) -> None:
        sums = self._squares(param, state)
        squares = touched.read(sums) + grad * grad
        touched.write(sums, squares)
        touched.add(param, grad.div(squares.sqrt().add_(group["eps"])).mul_(-group["lr"]))

    def kernel_step(self, rows, values, slot, param, state, group) -> None:
        squares, scalar = _rows_of(self._squares(param, state)), values.dtype.type
        lr, eps = scalar(group["lr"]), scalar(group["eps"])
        optimizer_rows.adagrad_step(rows, values, slot, _rows_of(param), squares, lr, eps)


class RowwiseAdagrad(RowSparseOptimizer):
    """Adagrad with one accumulator per row (a 1-D parameter's rows are its elements)."""

    def __init__(self, params, lr: float, eps: float = 1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @staticmethod
    def _squares(param, state) -> torch.Tensor:
        if "sum" not in state:
            state["sum"] = param.new_zeros(param.shape[:1])
        return state["sum"]

    def update(self, param, touched, grad, state, group) -> None:
        sums = self._squares(param, state)
        row_squares = grad.pow(2).flatten(1).mean(1) if grad.dim() > 1 else grad * grad
        squares = touched.read(sums) + row_squares
        touched.write(sums, squares)
        step = squares.sqrt().add_(group["eps"]).reciprocal_().mul_(-group["lr"])
        touched.add(param, grad * step.view(grad.shape[:1] + (1,) * max(grad.dim() - 1, 0)))

    def kernel_step(self, rows, values, slot, param, state, group) -> None:
        squares, scalar = self._squares(param, state).numpy(), values.dtype.type
        lr, eps, inverse_dim = scalar(group["lr"]), scalar(group["eps"]), scalar(1.0 / values.shape[1])
        optimizer_rows.rowwise_adagrad_step(rows, values, slot, _rows_of(param), squares, lr, eps, inverse_dim)


class LazyAdam(RowSparseOptimizer):
    """On the host branch the compiled kernel updates each touched row's moments and values in one pass. Elsewhere
    the touched rows of the moments are gathered and updated by torch's fused Adam kernel (the one
    `torch.optim.Adam(fused=True)` runs) applied to a zero parameter, which leaves the step's change in it; the
    moments are written back and the change added to the rows."""

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @staticmethod
    def _counted(param, state) -> None:
        """Creates the moments on the first step and counts the step (t, in `state["step"]`)."""
        if "step" not in state:
            state.update(
                step=torch.zeros((), dtype=torch.float32, device=param.device),
                exp_avg=torch.zeros_like(param),
                exp_avg_sq=torch.zeros_like(param),
            )
        state["step"] += 1

    def update(self, param, touched, grad, state, group) -> None:
        self._counted(param, state)
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

    def kernel_step(self, rows, values, slot, param, state, group) -> None:
        self._counted(param, state)
        (beta1, beta2), t, scalar = group["betas"], float(state["step"]), values.dtype.type
        optimizer_rows.lazy_adam_step(
            rows,
            values,
            slot,
            _rows_of(param),
            _rows_of(state["exp_avg"]),
            _rows_of(state["exp_avg_sq"]),
            scalar(group["lr"] / (1 - beta1**t)),
            scalar(beta1),
            scalar(1 - beta1),
            scalar(beta2),
            scalar(1 - beta2),
            scalar(group["eps"]),
            scalar((1 - beta2**t) ** 0.5),
        )


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
