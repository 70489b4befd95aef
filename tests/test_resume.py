"""A run killed at epoch k of n and trained again goes on from its checkpoint and ends with the weights and results
of an uninterrupted run, bit for bit on the CPU, having trained only epochs k+1..n (issue 26, item 8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from recx.config.run_config import resolve
from recx.runs import store
from recx.runs import train_run as trainer
from recx.runs.train_run import train_run
from recx.training import checkpoint
from recx.training import fit as fit_module

ROOT = Path(__file__).resolve().parents[1]
EPOCHS, KILLED_AFTER = 5, 2
CASES = {
    "interactions: bpr, uniform (row-wise Adagrad)": {"model": "mf", "loss": "bpr", "sampler": "uniform"},
    "interactions: bpr, lazy Adam, learning rate stepped every 2 epochs": {
        "model": "mf",
        "loss": "bpr",
        "sampler": "uniform",
        "optimizer": "lazy_adam",
        "lr_step_epochs": 2,
        "lr_step_gamma": 0.5,
    },
    "interactions: softmax over XIR draws (its cache and counts)": {
        "model": "mf",
        "loss": "softmax",
        "sampler": "xir",
        "batch_size": 128,
    },
    "interactions: lightgcn, bce over popularity draws excluding training items": {
        "model": "lightgcn",
        "loss": "bce",
        "sampler": "popularity",
        "n_negatives": 4,
        "sampler_args": {"exclude_train": True},
    },
    "users: mult-vae (dropout draws)": {"model": "multvae", "loss": "full_softmax", "batch_size": 64},
    "users: fastvae, midx_pop (codebooks), stepped learning rate": {
        "model": "fastvae",
        "loss": "softmax",
        "sampler": "midx_pop",
        "n_negatives": 20,
        "batch_size": 64,
        "sampler_args": {"n_codewords": 4},
        "lr_step_epochs": 1,
    },
    "alternating: wrmf": {"model": "wrmf"},
}


class Killed(BaseException):
    """Stands for kill -9: nothing in recx catches it, so the folder is left as the kill would leave it."""


def config_of(case: str):
    return resolve({"seed": 3, "dim": 8, "epochs": EPOCHS, "patience": EPOCHS, "device": "cpu", **CASES[case]})


def weights(folder: Path) -> dict:
    return torch.load(folder / "model.pt")


def assert_same_run(resumed: Path, uninterrupted: Path) -> None:
    pd.testing.assert_frame_equal(
        pd.read_parquet(resumed / "results.parquet"), pd.read_parquet(uninterrupted / "results.parquet")
    )
    first, second = weights(resumed), weights(uninterrupted)
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name
    losses = [
        [json.loads(line)["loss"] for line in (f / "epochs.jsonl").read_text().splitlines()]
        for f in (resumed, uninterrupted)
    ]
    assert losses[0] == losses[1]


def count_epochs(monkeypatch) -> list[int]:
    """The epochs the runner actually trains, recorded through the training loop's per-epoch log."""
    trained: list[int] = []
    log_epoch = store.log_epoch
    monkeypatch.setattr(
        trainer.store, "log_epoch", lambda folder, record: (trained.append(record["epoch"]), log_epoch(folder, record))
    )
    return trained


def killed_after_checkpoint(config, dataset, folder: Path, monkeypatch, epoch: int) -> None:
    """Train `folder` until epoch `epoch`'s checkpoint is written, then stop as kill -9 would."""
    save = checkpoint.save

    def save_then_die(path, runner, loop):
        save(path, runner, loop)
        if loop.epoch == epoch:
            raise Killed

    monkeypatch.setattr(checkpoint, "save", save_then_die)
    with pytest.raises(Killed):
        train_run(config, dataset, folder, checkpoint_every=1)
    monkeypatch.setattr(checkpoint, "save", save)


@pytest.mark.parametrize("case", list(CASES))
def test_killed_after_a_checkpoint_resumes_to_the_uninterrupted_run(tiny, tmp_path, monkeypatch, case):
    config = config_of(case)
    train_run(config, tiny, tmp_path / "whole", checkpoint_every=1)
    assert not (tmp_path / "whole" / store.CHECKPOINT).exists(), "the checkpoint goes once model.pt is written"

    killed_after_checkpoint(config, tiny, tmp_path / "killed", monkeypatch, KILLED_AFTER)
    assert store.state(tmp_path / "killed") == "incomplete" and store.resumable(tmp_path / "killed")
    trained = count_epochs(monkeypatch)
    train_run(config, tiny, tmp_path / "killed")
    assert trained == list(range(KILLED_AFTER + 1, EPOCHS + 1))
    assert_same_run(tmp_path / "killed", tmp_path / "whole")


def test_an_epoch_logged_after_the_last_checkpoint_is_trained_again_once(tiny, tmp_path, monkeypatch):
    """Killed between writing epoch k+1's line and its checkpoint: epochs.jsonl keeps k lines and k+1 runs again."""
    config = config_of("interactions: bpr, uniform (row-wise Adagrad)")
    train_run(config, tiny, tmp_path / "whole")
    log_epoch = store.log_epoch

    def log_then_die(folder, record):
        log_epoch(folder, record)
        if record["epoch"] == KILLED_AFTER + 1:
            raise Killed

    monkeypatch.setattr(trainer.store, "log_epoch", log_then_die)
    with pytest.raises(Killed):
        train_run(config, tiny, tmp_path / "killed", checkpoint_every=1)
    assert store.epochs_recorded(tmp_path / "killed") == KILLED_AFTER + 1
    monkeypatch.setattr(trainer.store, "log_epoch", log_epoch)
    trained = count_epochs(monkeypatch)
    train_run(config, tiny, tmp_path / "killed")
    assert trained == list(range(KILLED_AFTER + 1, EPOCHS + 1))
    assert_same_run(tmp_path / "killed", tmp_path / "whole")


def test_checkpoints_follow_checkpoint_every(tiny, tmp_path, monkeypatch):
    """Every 2nd epoch with 2; none with 0; by default only once CHECKPOINT_INTERVAL_S has passed."""
    config = config_of("interactions: bpr, uniform (row-wise Adagrad)")
    for every, interval, expected in ((2, 60.0, [2, 4]), (0, 0.0, []), (None, 0.0, [1, 2, 3, 4]), (None, 1e9, [])):
        saved: list[int] = []
        monkeypatch.setattr(checkpoint, "save", lambda path, runner, loop, saved=saved: saved.append(loop.epoch))
        monkeypatch.setattr(fit_module, "CHECKPOINT_INTERVAL_S", interval)
        train_run(config, tiny, tmp_path / f"run-{every}-{interval}", checkpoint_every=every)
        assert saved == expected, (every, interval)


def test_a_damaged_checkpoint_is_named_and_force_trains_again(tiny, tmp_path, monkeypatch):
    config = config_of("interactions: bpr, uniform (row-wise Adagrad)")
    killed_after_checkpoint(config, tiny, tmp_path / "run", monkeypatch, 1)
    saved = tmp_path / "run" / store.CHECKPOINT
    data = bytearray(saved.read_bytes())
    data[len(data) // 2] ^= 0x01
    saved.write_bytes(bytes(data))
    from recx.core.errors import RecxError

    with pytest.raises(RecxError, match=r"checkpoint\.pt: its content does not match its checksum.*--force"):
        train_run(config, tiny, tmp_path / "run")
    saved.write_bytes(b"short")
    with pytest.raises(RecxError, match=r"checkpoint\.pt: .*--force"):
        train_run(config, tiny, tmp_path / "run")
    train_run(config, tiny, tmp_path / "run", force=True)
    assert store.state(tmp_path / "run") == "complete"


def test_a_checkpoint_of_other_data_is_refused(tiny, tmp_path, monkeypatch):
    config = config_of("interactions: bpr, uniform (row-wise Adagrad)")
    killed_after_checkpoint(config, tiny, tmp_path / "run", monkeypatch, 1)
    environment = tmp_path / "run" / "environment.json"
    environment.write_text(environment.read_text().replace(tiny.data_hash, "0" * len(tiny.data_hash)))
    from recx.core.errors import RecxError

    with pytest.raises(RecxError, match="unfinished run trained on other data"):
        train_run(config, tiny, tmp_path / "run")


KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
from recx.config.run_config import resolve
from recx.data.dataset import load_dataset
from recx.runs import train_run as trainer
from recx.training import checkpoint
save = checkpoint.save
def save_then_kill(path, runner, loop):
    save(path, runner, loop)
    if loop.epoch == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
checkpoint.save = save_then_kill
config = resolve({"seed": 3, "dim": 8, "epochs": 5, "patience": 5, "device": "cpu", "model": "mf", "loss": "softmax",
                  "dataset": "tiny"})
trainer.train_run(config, load_dataset(Path(sys.argv[1]), "tiny"), Path(sys.argv[2]), checkpoint_every=1)
"""


def test_kill_9_then_the_same_command_finishes_the_run(tiny_root, tiny, tmp_path, recx_cli, train_tiny):
    """A real SIGKILL right after epoch 2's checkpoint; `recx train` on the same folder goes on from it."""
    folder = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, str(tiny_root), str(folder), "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert store.epochs_recorded(folder) == 2 and store.resumable(folder)
    result = train_tiny(
        folder,
        "--seed",
        "3",
        "--dim",
        "8",
        "--epochs",
        "5",
        "--patience",
        "5",
        "--device",
        "cpu",
        "--quiet",
    )
    assert result.code == 0, result.out + result.err
    assert "resuming after epoch 2 of 5" in result.out + result.err
    config = resolve(
        {
            "seed": 3,
            "dim": 8,
            "epochs": 5,
            "patience": 5,
            "device": "cpu",
            "model": "mf",
            "loss": "softmax",
            "dataset": "tiny",
        }
    )
    train_run(config, tiny, tmp_path / "whole")
    assert_same_run(folder, tmp_path / "whole")
