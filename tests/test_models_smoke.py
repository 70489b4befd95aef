"""End to end: every new loss and model trains two epochs through `train_run` on tiny synthetic data."""

import json

import pytest

from recx.config.run_config import resolve
from recx.core.progress import make_progress
from recx.runs.train_run import train_run

CASES = {
    "bce": {"loss": "bce", "n_negatives": 4},
    "bce+weights": {"loss": "bce", "n_negatives": 4, "weight_decay": 1e-4, "weight_decay_mode": "batch"},
    "directau": {"loss": "directau", "n_negatives": 1, "model_args": {"init": "prism"}},
    "mawu": {"loss": "mawu", "n_negatives": 1, "weight_decay": 1e-6},
    "nonlinear_mf": {"model": "nonlinear_mf", "loss": "directau", "n_negatives": 1},
    "lightgcn": {"model": "lightgcn", "loss": "bpr", "n_negatives": 1, "model_args": {"n_layers": 2}},
    "cosine": {"loss": "softmax", "n_negatives": 20, "model_args": {"scoring": "cosine", "temperature": 0.1}},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_trains_two_epochs(tiny, tmp_path, case):
    raw = {"dataset": "tiny", "dim": 8, "epochs": 2, "batch_size": 256, "lr": 0.01, "device": "cpu", **CASES[case]}
    outcome = train_run(resolve(raw), tiny, tmp_path / case.replace("+", "-"), progress=make_progress(quiet=True))
    assert (outcome.folder / "COMPLETE").is_file()
    assert outcome.results["value"].notna().all()
    losses = [json.loads(line)["loss"] for line in (outcome.folder / "epochs.jsonl").read_text().splitlines()]
    assert len(losses) == 2 and all(abs(v) < 1e6 for v in losses)
