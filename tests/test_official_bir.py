"""recx's SSL-Pop, BIR and XIR against the official HERECJ/XIR code (tests/golden/official/bir.json, written by
bench/official/bir.py from a checkout): the resampling probabilities, the loss given the official draws, and its
gradients w.r.t. both tables, all through recx's training step (`training_loss`) on a float64 MF.

Randomness: recx's draws are replaced by the official ones (`draw_counts` returns the multiplicities of the indices
the official `torch.multinomial` drew, after recording the probabilities it was given), so everything compared is
deterministic. recx keeps log p in float32 (`log_popularity`): it is compared to the official value at float32's
precision, and the other cases use the same formula in float64 so that they can be compared at 1e-8.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from recx.config.run_config import resolve
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.samplers import bir as bir_module
from recx.samplers import xir as xir_module
from recx.samplers.in_batch import log_popularity
from recx.sweeps.experiments import experiment_spec, load_experiments, plan
from recx.training.build import build_loss, build_model, build_sampler
from recx.training.step import training_loss

GOLDEN = json.loads((Path(__file__).parent / "golden" / "official" / "bir.json").read_text())
INPUTS = GOLDEN["inputs"]
RTOL = 1e-8


def f64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def golden_dataset() -> Dataset:
    pairs = torch.tensor(INPUTS["train"])
    train = CSR.from_pairs(pairs[:, 0], pairs[:, 1], INPUTS["n_users"], INPUTS["n_items"])
    return Dataset("golden", INPUTS["n_users"], INPUTS["n_items"], train, None, train, {}, "hash", Path("."))


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    pairs = torch.tensor(INPUTS["train"])[INPUTS["batch"]]
    return pairs[:, 0], pairs[:, 1]


def step(sampler_name: str, sampler_args: dict | None = None, prepare=lambda sampler: None) -> dict:
    """Loss and table gradients of one recx training step with the golden tables, log p in float64."""
    dataset = golden_dataset()
    config = resolve(
        {
            "model": "mf",
            "dim": len(INPUTS["user_table"][0]),
            "loss": "softmax",
            "optimizer": "adam",
            "sampler": sampler_name,
            "sampler_args": sampler_args or {},
            "model_args": {"init": "normal", "init_std": 1.0, "scoring": "dot", "temperature": 1.0},
        }
    )
    model = build_model(config, dataset, torch.device("cpu")).double()
    user_table, item_table = model.embedding_tables()[:2]
    with torch.no_grad():
        user_table.copy_(f64(INPUTS["user_table"]))
        item_table.copy_(f64(INPUTS["item_table"]))
    sampler = build_sampler(config, dataset, torch.Generator().manual_seed(0))
    counts = dataset.item_popularity.double()
    sampler.log_p = torch.log(counts / counts.sum())
    prepare(sampler)
    users, positives = batch()
    loss = training_loss(model, sampler, build_loss(config, dataset, torch.device("cpu")), config, users, positives)
    loss.backward()
    dense = [table.grad.to_dense() for table in (user_table, item_table)]
    return {"loss": loss.detach(), "grad_users": dense[0], "grad_items": dense[1], "sampler": sampler}


def assert_matches(recx: dict, official: dict) -> None:
    assert recx["loss"].item() == pytest.approx(official["loss"], rel=RTOL)
    for key in ("grad_users", "grad_items"):
        torch.testing.assert_close(recx[key], f64(official[key]), rtol=RTOL, atol=1e-12)


class OfficialDraws:
    """Stands in for `draw_counts`: records the probabilities recx resamples from and returns the multiplicities of
    the official draws, one index matrix per call."""

    def __init__(self, *indices):
        self.indices, self.probabilities = list(indices), []

    def __call__(self, probabilities, m, generator):
        drawn = torch.tensor(self.indices.pop(0))
        assert drawn.shape == (probabilities.shape[0], m)
        self.probabilities.append(probabilities.detach().clone())
        return torch.zeros_like(probabilities).scatter_add_(1, drawn, torch.ones_like(drawn, dtype=probabilities.dtype))


def test_log_popularity_is_the_official_pop_prob_at_float32():
    """Catches another normalisation of the counts (e.g. log(1 + c), the pop_mode 2 of the official code)."""
    torch.testing.assert_close(
        log_popularity(golden_dataset(), torch.device("cpu")).double(), f64(GOLDEN["log_p"]), rtol=1e-6, atol=0
    )


def test_ssl_pop_keep_positive_is_the_official_ssl_pop():
    """`keep_positive: true` = the official --debias 2: the query's own positive (and its duplicates) stay in the
    denominator, logQ on both sides. Catches masking the positive (recx's default) in the official row."""
    assert_matches(step("in_batch_pop", {"keep_positive": True}), GOLDEN["ssl_pop"])


def test_ssl_pop_default_masks_the_positive_and_its_duplicates():
    """recx's default SSL-Pop = the official loss with every batch position holding the query's positive removed;
    it differs from the official SSL-Pop (the row bir-parity and bir-batch-size no longer use)."""
    assert_matches(step("in_batch_pop"), GOLDEN["ssl_pop_masked"])
    assert GOLDEN["ssl_pop_masked"]["loss"] != pytest.approx(GOLDEN["ssl_pop"]["loss"], rel=1e-3)


def test_bir_resamples_and_scores_as_the_official_code(monkeypatch):
    """--debias 3: probabilities softmax(s - log p) over the whole batch row (own positive included), then a plain
    softmax over the positive and the m = B draws. Catches a logQ correction of the draws (e.g. the importance
    weights of `bir_iw`), masking the positive from the draws, or resampling without the -log p."""
    draws = OfficialDraws(GOLDEN["bir"]["indices"])
    monkeypatch.setattr(bir_module, "draw_counts", draws)
    assert_matches(step("bir"), GOLDEN["bir"])
    torch.testing.assert_close(draws.probabilities[0], f64(GOLDEN["bir"]["probabilities"]), rtol=RTOL, atol=1e-15)


def test_xir_resamples_mixes_and_updates_its_cache_as_the_official_code(monkeypatch):
    """--debias 8 (λ = 0.2, cache size = batch size): batch and cache draws from softmax(s - log p) over each set,
    λ CE(cache draws) + (1 - λ) CE(batch draws), occurrence counts h += draws (from 1), next cache ∝ h over the
    items drawn in the step. Catches swapping λ between the groups, a logQ correction of the draws, or another
    cache rule."""
    official = GOLDEN["xir"]
    draws = OfficialDraws(official["batch_indices"], official["cache_indices"])
    next_cache = []

    def record_next_cache(occurrence, drawn, size, generator):
        next_cache.append(occurrence * drawn / (occurrence * drawn).sum())
        return torch.tensor(official["cache"])

    monkeypatch.setattr(xir_module, "draw_counts", draws)
    monkeypatch.setattr(xir_module, "next_cache", record_next_cache)

    def fixed_cache(sampler):
        sampler.cache = torch.tensor(official["cache"])

    recx = step("xir", {"cache_weight": official["cache_weight"]}, fixed_cache)
    assert_matches(recx, official)
    for recorded, key in zip(draws.probabilities, ("batch_probabilities", "cache_probabilities"), strict=True):
        torch.testing.assert_close(recorded, f64(official[key]), rtol=RTOL, atol=1e-15)
    torch.testing.assert_close(recx["sampler"].occurrence, f64(official["occurrence"]), rtol=0, atol=0)
    torch.testing.assert_close(next_cache[0], f64(official["next_cache_probabilities"]), rtol=RTOL, atol=1e-15)


def test_bir_batch_size_runs_the_official_protocol():
    """bir-batch-size (the appendix's Figure 7) as the official run.py trains it: SSL-Pop keeps the positive
    (--debias 2) and the learning rate steps down by 0.95 every 5 epochs (run.py's StepLR, on by default)."""
    path = Path(__file__).resolve().parents[1] / "experiments.yaml"
    runs = plan(experiment_spec(load_experiments(path), "bir-batch-size", path), "bir-batch-size", path)
    assert {run.config.sampler for run in runs} == {"in_batch_pop", "bir"}
    for run in runs:
        assert (run.config.lr_step_epochs, run.config.lr_step_gamma) == (5, 0.95)
        if run.config.sampler == "in_batch_pop":
            assert run.config.sampler_args["keep_positive"]
