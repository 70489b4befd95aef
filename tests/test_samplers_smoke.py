"""Every sampler trains MF for two epochs on tiny synthetic data through the real trainer."""

from __future__ import annotations

import math

import pytest

from recx.config.run_config import resolve
from recx.runs.train_run import train_run

CASES = [
    ("uniform", "bpr", {"exclude_train": True}),
    ("popularity", "softmax", {"variant": "pow0.75", "exclude_train": True}),
    ("dns", "bpr", {"m": 2, "n_candidates": 20}),
    ("softmax_v", "bpr", {"rho": 1.0, "n_candidates": 20}),
    ("softmax_v", "bce", {"rho": 0.5, "n_candidates": 20, "loss_form": "bce"}),
    ("self_adversarial", "bpr", {"temperature": 0.5}),
    ("in_batch", "softmax", {}),
    ("in_batch_pop", "softmax", {}),
    ("bir", "softmax", {}),
    ("bir", "bpr", {"exclude_train": True, "n_resampled": 16}),
    ("xir", "softmax", {"cache_size": 16}),
]


@pytest.mark.parametrize("sampler, loss, sampler_args", CASES, ids=[f"{s}-{loss}" for s, loss, _ in CASES])
def test_sampler_trains_mf(tiny, tmp_path, sampler, loss, sampler_args):
    config = resolve(
        {
            "dataset": "tiny",
            "model": "mf",
            "loss": loss,
            "sampler": sampler,
            "sampler_args": sampler_args,
            "dim": 8,
            "epochs": 2,
            "batch_size": 64,
            "n_negatives": 8,
            "lr": 0.01,
            "device": "cpu",
            "kernels": "torch",
        }
    )
    outcome = train_run(config, tiny, tmp_path / "run", ks=[10])
    values = outcome.results.value
    assert values.notna().all() and all(math.isfinite(v) for v in values)


def test_exclude_train_is_recorded_in_the_run_config():
    for sampler in ("uniform", "popularity", "dns", "softmax_v", "self_adversarial", "bir", "xir"):
        assert "exclude_train" in resolve({"sampler": sampler}).sampler_args
    assert resolve({"sampler": "dns"}).sampler_args["exclude_train"] is True
    assert resolve({"sampler": "dns", "sampler_args": {"exclude_train": False}}).sampler_args["exclude_train"] is False
