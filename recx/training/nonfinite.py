"""Non-finite loss detection at a bounded interval, without a host sync inside the epoch.

Every `interval` steps the watch asks the device whether the losses written since its last check are all finite;
on CUDA the answer is copied to the host asynchronously (pinned memory and an event) and read once it has arrived,
so no step waits for it. A non-finite loss stops training within about `interval` steps (on CPU: at the check),
and the message names the epoch and the first bad step.
"""

from __future__ import annotations

import torch

from recx.core.errors import RecxError


def first_bad_step(losses: torch.Tensor) -> int | None:
    """1-based index of the first non-finite loss in `losses` (host tensor), or None."""
    bad = torch.nonzero(~torch.isfinite(losses))
    return int(bad[0]) + 1 if bad.numel() else None


def non_finite_error(losses: torch.Tensor, epoch: int, lr: float) -> RecxError | None:
    """The error naming the epoch and first bad step of `losses` (host tensor of an epoch's losses), or None."""
    bad = first_bad_step(losses)
    if bad is None:
        return None
    return RecxError(
        f"the loss became {float(losses[bad - 1])} at epoch {epoch}, step {bad}; "
        f"try a smaller lr (now {lr}) or a higher temperature"
    )


class NonFiniteWatch:
    """`after_step(step)` (1-based steps done) for one epoch whose losses are written into `losses` (device)."""

    def __init__(self, losses: torch.Tensor, epoch: int, lr: float, interval: int = 100):
        self.losses, self.epoch, self.lr, self.interval = losses, epoch, lr, interval
        self.on_cuda = losses.is_cuda
        self.pending: list[tuple[int, torch.Tensor, torch.cuda.Event | None]] = []
        self.checked = 0

    def after_step(self, step: int) -> None:
        if step - self.checked >= self.interval:
            finite = torch.isfinite(self.losses[self.checked : step]).all()
            if self.on_cuda:
                flag = torch.empty((), dtype=torch.bool, pin_memory=True)
                flag.copy_(finite, non_blocking=True)
                event = torch.cuda.Event()
                event.record()
                self.pending.append((step, flag, event))
            else:
                self.pending.append((step, finite, None))
            self.checked = step
        while self.pending and (self.pending[0][2] is None or self.pending[0][2].query()):
            done, flag, _ = self.pending.pop(0)
            error = None if bool(flag) else non_finite_error(self.losses[:done].cpu(), self.epoch, self.lr)
            if error is not None:
                raise error
