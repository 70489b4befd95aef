"""The training loop: epochs of the model's runner, validation, early stopping, and checkpoints after an epoch or
within one.

It knows no run folder: where each epoch's record and the checkpoint go is the caller's (recx.runs.train_run).
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.progress import Progress

from recx.config.run_config import RunConfig
from recx.core.compile_clock import CompileClock
from recx.core.device_paths import accelerator_branch
from recx.core.errors import RecxError
from recx.core.progress import RunProgress
from recx.core.threads import follow_share
from recx.data.dataset import Dataset
from recx.training import checkpoint
from recx.training.nonfinite import NonFiniteWatch, non_finite_error
from recx.training.runners.registry import RUNNERS

CHECKPOINT_INTERVAL_S = 60.0  # checkpoint_every None: after the first epoch that ends this long after the last
LOSS_REFRESH_S = 1.0  # the bar's running loss is read from the device at most this often (one host sync)


@dataclass
class FitHooks:
    """What the loop needs from its caller: the validation metric of the model (None: no validation; it reports
    its progress as after_batch(done, total)), where each epoch's record goes, the checkpoint file and how often to
    write it (None: by time, see `fit`), what to do when training goes on from a checkpoint after `epochs done`, and
    the run's name in the progress lines (None: the model, or loss+sampler)."""

    validate: Callable[[torch.nn.Module, Callable[[int, int], None]], float] | None
    log_epoch: Callable[[dict], None]
    checkpoint: Path
    checkpoint_every: int | None = None
    resumed: Callable[[int], None] = lambda epochs_done: None
    label: str | None = None


class _Checkpoints:
    """When and where the loop writes its checkpoints: every `every` epochs (0: never), or by time (None): after
    each epoch that ends, and after each step of a runner that `checkpoints_within_epoch`, at least
    CHECKPOINT_INTERVAL_S after the last checkpoint."""

    def __init__(self, path: Path, every: int | None):
        self.path, self.every, self.written_at = path, every, time.perf_counter()
        self.writing_in_epoch = 0.0  # seconds spent writing checkpoints within the current epoch

    def _time_passed(self) -> bool:
        return time.perf_counter() - self.written_at >= CHECKPOINT_INTERVAL_S

    def after_epoch(self, runner, loop: checkpoint.LoopState, last: bool) -> None:
        every = self.every
        if not last and (self._time_passed() if every is None else every > 0 and loop.epoch % every == 0):
            self.save(runner, loop)

    def within_epoch(
        self, runner, loop: checkpoint.LoopState, step: int, losses: torch.Tensor, started: float, clock: CompileClock
    ) -> None:
        """After step `step` of epoch loop.epoch + 1 (a time check; the checkpoint reads the losses from the device)."""
        if self.every is None and runner.checkpoints_within_epoch and step < runner.n_steps and self._time_passed():
            partial = copy.copy(loop)
            partial.step, partial.losses = step, losses[:step].cpu()
            partial.seconds = loop.seconds + time.perf_counter() - started - self.writing_in_epoch - clock.seconds
            began = time.perf_counter()
            self.save(runner, partial)
            self.writing_in_epoch += time.perf_counter() - began

    def save(self, runner, loop: checkpoint.LoopState) -> None:
        checkpoint.save(self.path, runner, loop)
        self.written_at = time.perf_counter()


def _step_reporter(
    progress: Progress,
    task,
    watch: NonFiniteWatch,
    losses: torch.Tensor,
    started: float,
    on_host: bool,
    saved: Callable[[int], None],
) -> Callable[[int], None]:
    """`after_step(step)` for one epoch: the non-finite watch, the CPU share (recx.core.threads.follow_share), a
    checkpoint when one is due (`saved(step)`), the bar, and (on the host) the running loss."""
    shown = {"at": started}

    def after_step(step: int) -> None:
        watch.after_step(step)
        follow_share()
        saved(step)
        now = time.perf_counter()
        if now - shown["at"] >= LOSS_REFRESH_S:
            shown["at"] = now
            running = f"  loss {float(losses[:step].mean()):.4f}" if on_host else ""
            progress.update(task, completed=step, status=f"{step / (now - started):.1f} steps/s{running}")
        else:
            progress.update(task, completed=step)

    return after_step


def _validation_reporter(progress: Progress, task, status: str) -> Callable[[int, int], None]:
    """`validated(done, total)`: the bar's status during validation."""

    def validated(done: int, total: int) -> None:
        progress.update(task, status=f"{status}  validating {done:,}/{total:,} users")

    return validated


def start_epoch(progress: Progress, task, description: str, done: int) -> None:
    """The bar at an epoch's start: its steps from `done` (a resumed epoch's), its clock and rate from now, so the
    time elapsed and left are the epoch's (the bar's count restarts each epoch; kept, the last epoch's samples made
    the rate, and "about T left" with it, wrong from the second epoch on)."""
    progress.reset(task, description=description, completed=done, status="", unit="step")


def improves(score: float, best: float, config: RunConfig) -> bool:
    """Whether a validation score beats the best so far: strictly higher; with `half_steps` (the RG authors'
    RecStudio loop) also an equal one, as RecStudio's EarlyStopping (`metric >= best`: a tie resets the patience and
    becomes the epoch kept)."""
    return score >= best if config.half_steps else score > best


def fit(config: RunConfig, dataset: Dataset, model, progress: Progress, hooks: FitHooks) -> int:
    """Train `model` in place; returns the selected epoch (best validation metric, else the last epoch).

    The epoch's steps are the runner's (recx.training.runners, by the model's runner); losses stay on the
    device during the epoch and are read once at its end (and for the bar's running loss at most once a second).
    Each epoch's record (epoch, loss, seconds, validation metric) goes to `hooks.log_epoch`; its seconds are the
    epoch's training: validation and checkpoint writes, after the epoch or within it, and one-off JIT compilation
    (`compile_seconds`, recorded apart: recx.core.compile_clock) are not counted. The whole state is
    written to `hooks.checkpoint` every `hooks.checkpoint_every` epochs (0: never; None: by time, see _Checkpoints:
    so that writing it costs a short epoch little, and a long epoch is checkpointed within); when that file exists,
    training goes on from it (recx.training.checkpoint), at the step it was taken, after `hooks.resumed(epochs done)`.
    Partial checkpoint files of a writer that died are removed first (the caller holds the run's lock).
    """
    runner, loop = _start(config, dataset, model, progress, hooks)
    checkpoints = _Checkpoints(hooks.checkpoint, hooks.checkpoint_every)
    name = hooks.label or (config.model if model.losses == () else f"{config.loss}+{config.sampler}")
    task = progress.add_task(name, total=max(runner.n_steps, 1), status="", unit="step")
    epoch = loop.epoch
    for epoch in range(loop.epoch + 1, config.epochs + 1 if runner.n_steps else 1):
        start_epoch(progress, task, f"{name} epoch {epoch}/{config.epochs}", loop.step)
        record = _train_epoch(config, model, runner, loop, epoch, checkpoints, progress, task)
        status = f"loss {record['loss']:.4f}"
        if hooks.validate is not None and epoch % config.eval_every == 0:
            score = hooks.validate(model, _validation_reporter(progress, task, status))
            record[f"valid_{config.valid_metric}"] = score
            status += f"  valid {config.valid_metric} {score:.4f}"
            _select(score, epoch, model, loop, config)
        hooks.log_epoch(record)
        loop.epoch = epoch
        progress.update(task, status=status)
        if isinstance(progress, RunProgress):
            progress.line(f"{name} epoch {epoch}/{config.epochs}: {status}  ({record['seconds']:.1f} s)")
        if loop.waited >= config.patience:
            break
        checkpoints.after_epoch(runner, loop, last=epoch >= config.epochs)
    progress.remove_task(task)
    if loop.best_state is None:
        return epoch
    model.load_state_dict(loop.best_state)
    return loop.best_epoch


def _start(config: RunConfig, dataset: Dataset, model, progress: Progress, hooks: FitHooks):
    """The runner and loop state: fresh, or from the checkpoint `hooks.checkpoint` when it exists (partial files of a
    writer that died are removed first), then `hooks.resumed(epochs done)`."""
    saved = hooks.checkpoint
    generator = torch.Generator(device=model.device).manual_seed(config.seed)
    runner = RUNNERS.get(model.runner)(config, dataset, model, generator)
    loop = checkpoint.LoopState()
    checkpoint.remove_partials(saved)
    if saved.is_file():
        try:
            loop = checkpoint.load(saved, runner)
        except RecxError as exc:
            raise RecxError(f"{exc}; pass --force to train the run again from the first epoch") from None
        hooks.resumed(loop.epoch)
        where = f"at step {loop.step} of epoch {loop.epoch + 1}" if loop.step else f"after epoch {loop.epoch}"
        progress.console.print(f"resuming {where} of {config.epochs} (its checkpoint)", highlight=False)
    return runner, loop


def _train_epoch(config, model, runner, loop, epoch: int, checkpoints, progress: Progress, task) -> dict:
    """One epoch of the runner's steps (from loop.step when resumed within it); its record: epoch, mean loss,
    seconds of training (checkpoint writes and compilation out) and compile_seconds when any."""
    model.train()
    started = time.perf_counter()
    losses = torch.zeros(runner.n_steps, device=model.device)
    compiling = CompileClock()
    if loop.step and loop.losses is not None:  # resumed within this epoch
        losses[: loop.step] = loop.losses.to(model.device)
    on_host = not accelerator_branch(model.device)  # the running loss is shown only where reading it costs no sync
    within = functools.partial(checkpoints.within_epoch, runner, loop, losses=losses, started=started, clock=compiling)
    watch = NonFiniteWatch(losses, epoch, config.lr)
    after_step = _step_reporter(progress, task, watch, losses, started, on_host, within)
    with compiling.counting():
        runner.train_epoch(epoch, losses, after_step)
    losses = losses.cpu()
    error = non_finite_error(losses, epoch, config.lr)
    if error is not None:
        raise error
    seconds = loop.seconds + time.perf_counter() - started - checkpoints.writing_in_epoch - compiling.seconds
    checkpoints.writing_in_epoch = 0.0
    loop.step, loop.losses, loop.seconds = 0, None, 0.0
    record = {"epoch": epoch, "loss": float(losses.mean()), "seconds": seconds}
    if compiling.seconds:
        record["compile_seconds"] = compiling.seconds
    return record


def _select(score: float, epoch: int, model, loop, config: RunConfig) -> None:
    """Keep the model's state when `score` improves on the best (early stopping counts the others)."""
    if improves(score, loop.best_score, config):
        loop.best_score, loop.best_epoch, loop.waited = score, epoch, 0
        loop.best_state = copy.deepcopy(model.state_dict())
    else:
        loop.waited += 1
