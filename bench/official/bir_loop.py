"""Golden training loops from the official BIR / XIR code (issue 43) -> tests/golden/official/bir_loop.json.

    python3 bench/official/bir_loop.py --repo XIR_CHECKOUT [--out tests/golden/official/bir_loop.json]

XIR_CHECKOUT is a checkout of HERECJ/XIR or a bare mirror (its Python files at HEAD are then extracted to a
temporary folder). For each of SSL-Pop (`--debias 2`), BIR (`--debias 3`) and XIR (`--debias 8 --lambda 0.2`) the
script runs the unmodified `run.py` as `__main__` (runpy, sys.argv set to the command stored in the JSON) on a tiny
`.mat` it writes to a temporary data folder: run.py builds its trainer, `load_dataset` splits the matrix (Python's
`random`, seeded by the trainer), `fit` builds the interaction DataLoader (shuffle), the N(0, 1) MF, the Adam with
weight decay and the StepLR of `_fit`, and `_fit` trains 3 epochs. CPU, float64 (torch's default dtype).

Nothing official is replaced on the training path; everything random is recorded as it happens:
- each `_train_step` call's batch (user ids, 1-based item ids: the DataLoader's shuffled order) and the loss it
  returned, and the MF tables before the first step;
- every `torch.multinomial` call (its weights and the indices it drew): BIR's resampling, XIR's cache and batch
  draws and its next cache (`Cache.update_pool`);
- XIR's first cache (`Cache.__init__`'s `torch.randint`), and the cache each step read and left (`sample_pool`
  before and after `Cache.update_pool`);
- the MF tables after each epoch (read when `_fit` logs "Epoch e", after the epoch's steps and its StepLR step).
Stubs: torch.utils.tensorboard (a SummaryWriter that records nothing) and torchmetrics (imported by the evaluator);
`Trainer.evaluate` (called after epochs 0 and 2, reads the model under no_grad, changes nothing the training reads)
returns no metrics, because the official evaluator's top-100 needs more than the tiny input's 7 items.
"""

from __future__ import annotations

import argparse
import json
import logging
import runpy
import shlex
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse
import torch
from checkout import checkout

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "bir_loop.json"
N_USERS, N_ITEMS = 5, 7
# 5 interactions a user: the official split keeps round(0.8 * 5) = 4 of them for training
INTERACTIONS = [
    [0, 1, 3, 5, 6],
    [1, 2, 4, 6, 0],
    [0, 1, 5, 3, 2],
    [1, 3, 4, 0, 6],
    [2, 5, 6, 0, 4],
]
COMMON = (
    "--device cpu --data_dir DATA --data_name tiny --log_path LOGS --num_workers 0 --emb_dim 3 --epoch 3 "
    "--learning_rate 0.05 --weight_decay 0.01 --batch_size 6 --step_size 1 --step_gamma 0.5 --seed 10"
)
CASES = {"ssl_pop": "--debias 2", "bir": "--debias 3", "xir": "--debias 8 --lambda 0.2"}


class SummaryWriter:
    def __init__(self, *args, **kwargs):
        pass

    def add_scalar(self, *args, **kwargs):
        pass

    def flush(self):
        pass


class StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return object


def stub_modules() -> None:
    tensorboard = types.ModuleType("torch.utils.tensorboard")
    tensorboard.SummaryWriter = SummaryWriter
    metrics = StubModule("torchmetrics")
    metrics.functional = StubModule("torchmetrics.functional")
    sys.modules.update(
        {"torch.utils.tensorboard": tensorboard, "torchmetrics": metrics, "torchmetrics.functional": metrics.functional}
    )


def write_data(folder: Path) -> None:
    rows = [user for user, items in enumerate(INTERACTIONS) for _ in items]
    columns = [item for items in INTERACTIONS for item in items]
    matrix = scipy.sparse.csc_matrix((np.ones(len(rows)), (rows, columns)), shape=(N_USERS, N_ITEMS))
    scipy.io.savemat(folder / "tiny.mat", {"data": matrix})


class Recorder(logging.Handler):
    """Records the run: the steps' batches and losses, the multinomial and randint draws, the tables per epoch."""

    def __init__(self):
        super().__init__()
        self.model, self.steps, self.multinomial, self.randint, self.epochs = None, [], [], [], []
        self.initial, self.steps_pools = None, []

    def tables(self) -> dict:
        return {
            "user_table": self.model.user_encoder.weight.detach().tolist(),
            "item_table": self.model.item_encoder.weight.detach()[1:].tolist(),
        }

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Epoch "):
            self.epochs.append({"epoch": int(message.split()[1]), **self.tables()})

    def wrap_step(self, cls):
        original = cls.__dict__["_train_step"]

        def recorded(trainer, user_id, item_id, model, debias, **kwargs):
            if self.model is None:
                self.model = model
                self.initial = self.tables()
            first_draw = len(self.multinomial)
            first_pool = len(self.steps_pools)
            loss = original(trainer, user_id, item_id, model, debias, **kwargs)
            step = {
                "users": user_id.tolist(),
                "items": item_id.tolist(),
                "loss": loss.item(),
                "draws": list(range(first_draw, len(self.multinomial))),
            }
            if len(self.steps_pools) > first_pool:
                step.update(self.steps_pools[first_pool])
            self.steps.append(step)
            return loss

        cls._train_step = recorded
        return original

    def patch_torch(self):
        multinomial, randint = torch.multinomial, torch.randint

        def recorded_multinomial(weights, n, replacement=False, **kwargs):
            drawn = multinomial(weights, n, replacement=replacement, **kwargs)
            self.multinomial.append({"weights": weights.tolist(), "n": n, "drawn": drawn.tolist()})
            return drawn

        def recorded_randint(*args, **kwargs):
            drawn = randint(*args, **kwargs)
            self.randint.append(drawn.tolist())
            return drawn

        torch.multinomial, torch.randint = recorded_multinomial, recorded_randint
        return multinomial, randint


def run_case(root: Path, argv: list[str]) -> dict:
    from framework import trainer as framework_trainer
    from framework import trainer_cache

    recorder = Recorder()
    logging.getLogger().addHandler(recorder)
    classes = (framework_trainer.Trainer, framework_trainer.Trainer_Resample, trainer_cache.Trainer_Cache)
    originals = [recorder.wrap_step(cls) for cls in classes]
    update_pool = trainer_cache.Cache.update_pool

    def recorded_update_pool(cache, *args, **kwargs):
        before = cache.sample_pool.tolist()
        out = update_pool(cache, *args, **kwargs)
        recorder.steps_pools.append({"cache": before, "next_cache": cache.sample_pool.tolist()})
        return out

    trainer_cache.Cache.update_pool = recorded_update_pool
    evaluate = framework_trainer.Trainer.evaluate
    framework_trainer.Trainer.evaluate = lambda self, model, loader: {}
    multinomial, randint = recorder.patch_torch()
    split = {}
    original_split = framework_trainer.RatMixData.split_matrix

    def recorded_split(self, mat, ratio=0.8):
        train, test = original_split(self, mat, ratio)
        split["train"] = [[int(u), int(i)] for u, i in zip(*train.nonzero(), strict=True)]
        return train, test

    framework_trainer.RatMixData.split_matrix = recorded_split
    saved_argv = sys.argv
    sys.argv = [str(root / "run.py"), *argv]
    try:
        runpy.run_path(str(root / "run.py"), run_name="__main__")
    finally:
        sys.argv = saved_argv
        torch.multinomial, torch.randint = multinomial, randint
        for cls, original in zip(classes, originals, strict=True):
            cls._train_step = original
        framework_trainer.Trainer.evaluate = evaluate
        trainer_cache.Cache.update_pool = update_pool
        framework_trainer.RatMixData.split_matrix = original_split
        logging.getLogger().removeHandler(recorder)
        for handler in list(logging.getLogger().handlers):  # run.py's get_logger adds a file and a stream handler
            logging.getLogger().removeHandler(handler)
    n_epochs = len(recorder.epochs)
    per_epoch = len(recorder.steps) // n_epochs
    epoch_losses = []
    for epoch in range(n_epochs):
        total = 0.0  # _fit's loss_: 0.0 plus each step's detached loss, in order
        for step in recorder.steps[epoch * per_epoch : (epoch + 1) * per_epoch]:
            total += step["loss"]
        epoch_losses.append(total)
    return {
        "train": split["train"],
        "initial": recorder.initial,
        "first_cache": recorder.randint[0] if recorder.randint else None,
        "steps": recorder.steps,
        "multinomial": recorder.multinomial,
        "epochs": recorder.epochs,
        "epoch_loss_sums": epoch_losses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of HERECJ/XIR")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    stub_modules()
    document = {
        "repository": "HERECJ/XIR",
        "command": shlex.join(["python3", "bench/official/bir_loop.py", *sys.argv[1:]]),
        "function": "run.py (as __main__): framework/trainer.py Trainer.load_dataset, Trainer.fit, Trainer._fit "
        "with Trainer._train_step (--debias 2), Trainer_Resample._train_step (--debias 3); "
        "framework/trainer_cache.py Trainer_Cache.fit, Trainer_Cache._train_step, Cache (--debias 8)",
        "interactions": INTERACTIONS,
        "n_users": N_USERS,
        "n_items": N_ITEMS,
    }
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "code").mkdir()
        root, commit = checkout(args.repo, scratch / "code", "framework")
        sys.path.insert(0, str(root))
        document["commit"] = commit
        for name, flags in CASES.items():
            data, logs = scratch / f"data_{name}", scratch / f"logs_{name}"
            data.mkdir()
            write_data(data)
            command = f"{COMMON} {flags}"
            document[name] = {"run_py_arguments": command}
            argv = shlex.split(command.replace("DATA", str(data)).replace("LOGS", str(logs)))
            document[name].update(run_case(root, argv))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
