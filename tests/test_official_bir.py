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
import shlex
from pathlib import Path

import pytest
import torch
from official_helpers import LOOP_RTOL, assert_epoch_tables, f64

from recx.config.run_config import resolve
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.samplers import bir as bir_module
from recx.samplers import xir as xir_module
from recx.samplers.shared import log_popularity
from recx.sweeps.experiments import experiment_spec, load_experiments, plan
from recx.training.build import build_loss, build_model, build_sampler
from recx.training.step import training_loss

GOLDEN = json.loads((Path(__file__).parent / "golden" / "official" / "bir.json").read_text())
INPUTS = GOLDEN["inputs"]
RTOL = 1e-8


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


# ---------------------------------------------------------------------------------------------------------------
# The official training loops (issue 43): tests/golden/official/bir_loop.json, written by bench/official/bir_loop.py
# running the unmodified run.py for 3 epochs with every draw recorded. recx's trainer (`recx.training.fit.fit`, the
# interactions runner, its Adam and StepLR) is fed the same batches, draws and initial tables, and must end each
# epoch with the official tables and loss.

LOOP = json.loads((Path(__file__).parent / "golden" / "official" / "bir_loop.json").read_text())


def official_arguments(case: str) -> dict[str, str]:
    """run.py's arguments of a case (every flag given takes a value)."""
    tokens = shlex.split(LOOP[case]["run_py_arguments"])
    return dict(zip(tokens[::2], tokens[1::2], strict=True))


def loop_dataset(case: str) -> Dataset:
    """The official split's training pairs (its items 1-based: recx's + 1)."""
    pairs = torch.tensor(LOOP[case]["train"])
    train = CSR.from_pairs(pairs[:, 0], pairs[:, 1], LOOP["n_users"], LOOP["n_items"])
    return Dataset("loop", LOOP["n_users"], LOOP["n_items"], train, None, train, {}, "hash", Path("."))


def loop_config(case: str, sampler: str, sampler_args: dict):
    """recx's settings for run.py's arguments: MF with N(0, 1) rows and dot scores, softmax, dense Adam with weight
    decay on every row every step, StepLR(step_size, gamma)."""
    args = official_arguments(case)
    return resolve(
        {
            "model": "mf",
            "dim": int(args["--emb_dim"]),
            "loss": "softmax",
            "optimizer": "adam",
            "sampler": sampler,
            "sampler_args": sampler_args,
            "model_args": {"init": "normal", "init_std": 1.0, "scoring": "dot", "temperature": 1.0},
            "epochs": int(args["--epoch"]),
            "batch_size": int(args["--batch_size"]),
            "lr": float(args["--learning_rate"]),
            "weight_decay": float(args["--weight_decay"]),
            "weight_decay_mode": "full",
            "lr_step_epochs": int(args["--step_size"]),
            "lr_step_gamma": float(args["--step_gamma"]),
            "device": "cpu",
        }
    )


def float64_log_popularity(dataset, device):
    """log p in float64 (recx keeps it in float32, compared with the official value above), for a float64 model."""
    counts = dataset.item_popularity.to(device=device, dtype=torch.float64)
    return torch.log(counts / counts.sum())


class LoopDraws:
    """Stands in for `draw_counts` over a whole run: the official draws of each step in recx's order of calls
    (`order`: the positions, among a step's recorded multinomial calls, of recx's first, second, ... call), each
    checked against the probabilities recx resamples from."""

    def __init__(self, official: dict, order: tuple[int, ...]):
        calls = official["multinomial"]
        self.queue = [calls[step["draws"][k]] for step in official["steps"] for k in order]

    def __call__(self, probabilities, m, generator):
        call = self.queue.pop(0)
        drawn = torch.tensor(call["drawn"])
        assert drawn.shape == (probabilities.shape[0], m), f"recx draws {m} per query, the official code {call['n']}"
        torch.testing.assert_close(probabilities, f64(call["weights"]), rtol=LOOP_RTOL, atol=1e-12)
        return torch.zeros_like(probabilities).scatter_add_(1, drawn, torch.ones_like(drawn, dtype=probabilities.dtype))


def run_official_loop(case: str, sampler: str, sampler_args: dict, monkeypatch, tmp_path) -> list[dict]:
    """recx's `fit` on the official split from the official initial tables, each epoch's interactions in the
    official DataLoader's order; returns each epoch's record with the tables after it."""
    from rich.progress import Progress

    from recx.samplers import in_batch as in_batch_module
    from recx.training.fit import FitHooks, fit
    from recx.training.runners.interactions import InteractionEpochs

    official = LOOP[case]
    dataset = loop_dataset(case)
    config = loop_config(case, sampler, sampler_args)
    for module in (in_batch_module, bir_module, xir_module):
        monkeypatch.setattr(module, "log_popularity", float64_log_popularity)
    model = build_model(config, dataset, torch.device("cpu")).double()
    user_table, item_table = model.embedding_tables()[:2]
    with torch.no_grad():
        user_table.copy_(f64(official["initial"]["user_table"]))
        item_table.copy_(f64(official["initial"]["item_table"]))
    train = dataset.train
    position = {pair: k for k, pair in enumerate(zip(train.row_ids().tolist(), train.indices.tolist(), strict=True))}
    per_epoch = len(official["steps"]) // len(official["epochs"])
    orders = [
        torch.tensor(
            [
                position[(user, item - 1)]
                for step in official["steps"][epoch * per_epoch : (epoch + 1) * per_epoch]
                for user, item in zip(step["users"], step["items"], strict=True)
            ]
        )
        for epoch in range(len(official["epochs"]))
    ]
    monkeypatch.setattr(InteractionEpochs, "shuffled", lambda runner, n: orders.pop(0))
    records: list[dict] = []

    def log_epoch(record: dict) -> None:
        tables = {"user_table": user_table.detach().clone(), "item_table": item_table.detach().clone()}
        records.append({**record, **tables})

    with Progress(disable=True) as progress:
        fit(config, dataset, model, progress, FitHooks(None, log_epoch, tmp_path / "checkpoint.pt", 0))
    assert not orders
    return records


def assert_official_epochs(records: list[dict], official: dict) -> None:
    """Each epoch's tables and loss (recx records the mean of the steps' losses, the official `_fit` their sum)."""
    per_epoch = len(official["steps"]) // len(official["epochs"])
    assert_epoch_tables(records, official["epochs"], ("user_table", "item_table"))
    for epoch, record in enumerate(records, start=1):
        official_loss = official["epoch_loss_sums"][epoch - 1] / per_epoch
        assert record["loss"] == pytest.approx(official_loss, rel=LOOP_RTOL), f"epoch {epoch} loss"


def test_ssl_pop_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """run.py --debias 2 for 3 epochs (20 interactions, batches of 6: the last batch of each epoch holds 2), Adam
    lr 0.05 with weight decay 0.01 on both whole tables every step, StepLR(1, 0.5) after each epoch: the tables after
    each epoch and its loss. Pins the loop around the golden-tested loss: the batches' interactions (the official
    order fed in), the optimizer's weight decay reaching every row, the learning rate stepped once per epoch, the
    last partial batch trained, and the in-batch candidates built per batch with the positive kept."""
    records = run_official_loop("ssl_pop", "in_batch_pop", {"keep_positive": True}, monkeypatch, tmp_path)
    assert_official_epochs(records, LOOP["ssl_pop"])


def test_bir_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """run.py --debias 3 for 3 epochs, as the SSL-Pop loop, with the official `torch.multinomial` draws fed to recx's
    resampling in order (each step's resampling probabilities checked against the official ones on the way): the
    tables after each epoch and its loss. Pins BIR's per-batch resampling across steps: m = the size of the batch at
    hand (the last, partial batch resamples 2 per query), probabilities from the tables as the previous step left
    them (the draw made before the step's update)."""
    official = LOOP["bir"]
    draws = LoopDraws(official, (0,))
    monkeypatch.setattr(bir_module, "draw_counts", draws)
    records = run_official_loop("bir", "bir", {}, monkeypatch, tmp_path)
    assert not draws.queue
    assert_official_epochs(records, official)


def test_xir_training_loop_is_the_official_run(monkeypatch, tmp_path):
    """run.py --debias 8 --lambda 0.2 for 3 epochs, the official first cache (`Cache.__init__`'s randint), its
    batch and cache draws and its next caches fed to recx in order (probabilities and the next cache's weights
    checked on the way): the tables after each epoch and its loss. Pins XIR's cache across steps and epochs: a step
    samples from the cache the previous step left and then replaces it, the occurrence counts accumulate over the
    whole run (never reset per epoch), and every batch, the last partial one included, draws int(batch_size / 2)
    per group as the official Cache.update_pool (its size is the run's batch size)."""
    official = LOOP["xir"]
    draws = LoopDraws(official, (1, 0))  # official: cache draws, batch draws, next cache; recx: batch, then cache
    next_caches = [(step, official["multinomial"][step["draws"][2]]) for step in official["steps"]]

    def official_next_cache(occurrence, drawn, size, generator):
        step, call = next_caches.pop(0)
        assert size == len(step["next_cache"])
        values = torch.nonzero(drawn).flatten()
        torch.testing.assert_close(occurrence[values], f64(call["weights"]), rtol=0, atol=0)
        return torch.tensor(step["next_cache"]) - 1

    def official_first_cache(sampler, size):
        assert size == len(official["first_cache"])
        return torch.tensor(official["first_cache"]) - 1

    monkeypatch.setattr(xir_module, "draw_counts", draws)
    monkeypatch.setattr(xir_module, "next_cache", official_next_cache)
    monkeypatch.setattr(xir_module.CachedImportanceResampler, "first_cache", official_first_cache)
    cache_weight = float(official_arguments("xir")["--lambda"])
    records = run_official_loop("xir", "xir", {"cache_weight": cache_weight}, monkeypatch, tmp_path)
    assert not draws.queue and not next_caches
    assert_official_epochs(records, official)
