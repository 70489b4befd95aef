"""A checkpoint is data, not code: it holds tensors, numbers, strings and containers of them, is read with torch's
`weights_only` loader, and a crafted file that would run a command when unpickled is refused without running it
(recx.training.checkpoint, recx.training.state). Every sampler's and runner's state goes back onto a freshly built
runner exactly: the next epoch trains as the uninterrupted run's does."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from pathlib import Path

import pytest
import torch
from test_resume import config_of, killed_after_checkpoint

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.runs import store
from recx.runs.train_run import train_run
from recx.samplers.registry import SAMPLERS
from recx.training import checkpoint, state
from recx.training.build import build_model
from recx.training.runners.registry import RUNNERS

BPR = "interactions: bpr, uniform (row-wise Adagrad)"


class RunsACommand:
    """Unpickled, it runs `touch PATH` (what a crafted checkpoint of a colleague's run folder could hold)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def stopped_run(tiny, tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A run folder stopped after epoch 2's checkpoint, and where a crafted file's command would leave its mark."""
    folder = tmp_path / "run"
    killed_after_checkpoint(config_of(BPR), tiny, folder, monkeypatch, 2)
    assert store.resumable(folder)
    return folder, tmp_path / "marker"


def train_again(tiny, folder: Path, force: bool = False) -> str:
    """The same run trained again on `folder`: the error's message, or "" when it completed."""
    try:
        train_run(config_of(BPR), tiny, folder, force=force)
    except RecxError as exc:
        return str(exc)
    return ""


def test_the_checkpoint_file_is_read_by_torchs_weights_only_loader(tiny, tmp_path, monkeypatch):
    folder, _ = stopped_run(tiny, tmp_path, monkeypatch)
    data = (folder / "checkpoint.pt").read_bytes()
    assert data.startswith(checkpoint.MAGIC)
    payload = torch.load(io.BytesIO(data[len(checkpoint.MAGIC) + checkpoint.DIGEST :]), weights_only=True)
    assert payload["run"]["run_id"] == config_of(BPR).run_id() and payload["loop"]["epoch"] == 2


def test_a_crafted_checkpoint_is_refused_and_runs_nothing(tiny, tmp_path, monkeypatch):
    """The file has the current header and a matching checksum (anyone can compute one), and a pickle that calls
    os.system: the weights-only loader refuses the call, so the command never runs."""
    folder, marker = stopped_run(tiny, tmp_path, monkeypatch)
    buffer = io.BytesIO()
    torch.save({"run": RunsACommand(marker)}, buffer)
    body = buffer.getvalue()
    (folder / "checkpoint.pt").write_bytes(checkpoint.MAGIC + hashlib.sha256(body).digest() + body)
    message = train_again(tiny, folder)
    assert "unreadable checkpoint" in message and "--force" in message, message
    assert not marker.exists()


def test_a_pickled_checkpoint_of_an_older_recx_is_refused_unread(tiny, tmp_path, monkeypatch):
    """Older recx wrote the sha256 then a pickle of whole objects; such a file (here one that runs a command) is
    refused before anything in it is read, with the way on: --force."""
    folder, marker = stopped_run(tiny, tmp_path, monkeypatch)
    body = pickle.dumps(RunsACommand(marker))
    (folder / "checkpoint.pt").write_bytes(hashlib.sha256(body).digest() + body)
    message = train_again(tiny, folder)
    assert "older recx" in message and "--force" in message, message
    assert not marker.exists()
    assert train_again(tiny, folder, force=True) == "" and store.is_complete(folder)


def runner_after_one_epoch(config, dataset):
    model = build_model(config, dataset, torch.device("cpu"))
    runner = RUNNERS.get(model.runner)(config, dataset, model, torch.Generator().manual_seed(config.seed))
    runner.train_epoch(1, torch.zeros(runner.n_steps), lambda step: None)
    return runner


def fresh_runner(config, dataset):
    model = build_model(config, dataset, torch.device("cpu"))
    return RUNNERS.get(model.runner)(config, dataset, model, torch.Generator().manual_seed(config.seed + 1))


def next_epoch(runner) -> tuple[torch.Tensor, dict]:
    torch.manual_seed(11)
    losses = torch.zeros(runner.n_steps)
    runner.train_epoch(2, losses, lambda step: None)
    return losses, runner.model.state_dict()


@pytest.mark.parametrize("sampler", SAMPLERS.names())
def test_every_samplers_state_goes_back_onto_a_fresh_runner(tiny, sampler):
    """Trained one epoch, its state saved as data (torch.save, read back weights-only) and put onto a runner built
    afresh (another generator seed, new model): the second epoch's losses and weights equal the first runner's."""
    config = resolve({"seed": 3, "dim": 8, "epochs": 2, "device": "cpu", "model": "mf", "loss": "softmax",
                      "sampler": sampler, "n_negatives": 8, "batch_size": 256})  # fmt: skip
    trained = runner_after_one_epoch(config, tiny)
    buffer = io.BytesIO()
    torch.save(state.state_of(trained, checkpoint._shared_objects(trained)), buffer)
    tree = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    resumed = fresh_runner(config, tiny)
    resumed.model.load_state_dict(trained.model.state_dict())
    state.restore(resumed, tree, checkpoint._shared_objects(resumed))
    (losses, weights), (expected_losses, expected_weights) = next_epoch(resumed), next_epoch(trained)
    assert torch.equal(losses, expected_losses)
    assert all(torch.equal(weights[name], expected_weights[name]) for name in weights)


def test_a_parameter_is_restored_in_place_and_shared_objects_by_name(tiny):
    """MAWU's margins are parameters the optimizer holds: restored into the fresh ones, not replaced; the dataset
    and model are the resuming run's own."""
    config = resolve({"seed": 3, "dim": 8, "epochs": 2, "device": "cpu", "model": "mf", "loss": "mawu"})
    trained = runner_after_one_epoch(config, tiny)
    resumed = fresh_runner(config, tiny)
    margin = resumed.loss_fn.user_margin
    state.restore(resumed, state.state_of(trained, checkpoint._shared_objects(trained)), {
        **checkpoint._shared_objects(resumed)})  # fmt: skip
    assert resumed.loss_fn.user_margin is margin and torch.equal(margin, trained.loss_fn.user_margin)
    assert resumed.sampler.dataset is tiny and resumed.model is not trained.model


class Holder:
    def __init__(self, value):
        self.value = value


def test_a_value_that_is_not_data_is_named_by_its_path():
    with pytest.raises(TypeError, match=r"runner\.value\[1\]: a set cannot be kept"):
        state.state_of(Holder([1, {2}]), {})


@pytest.mark.parametrize(
    "tree, message",
    [
        ({"~object": {"__class__": 1}}, "not an attribute name"),
        ({"~object": {"value": {"~shared": "model"}}}, "which this run does not have"),
        ({"~object": {"value": {"~generator": torch.zeros(4, dtype=torch.uint8)}}}, "a Generator in the checkpoint"),
        ([1, 2], "holds no runner state"),
    ],
)
def test_a_tree_that_does_not_fit_the_runner_is_refused(tree, message):
    with pytest.raises(ValueError, match=message):
        state.restore(Holder(1), tree, {})


def test_tensors_held_twice_are_one_tensor_after_the_round_trip():
    shared = torch.arange(3.0)
    holder = Holder((shared, shared))
    buffer = io.BytesIO()
    torch.save(state.state_of(holder, {}), buffer)
    fresh = Holder(None)
    state.restore(fresh, torch.load(io.BytesIO(buffer.getvalue()), weights_only=True), {})
    assert fresh.value[0] is fresh.value[1] and torch.equal(fresh.value[0], shared)
