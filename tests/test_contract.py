"""The contract every registered name keeps (in the spirit of implicit's tests/recommender_base_test.py: one table of
per-name settings, one set of checks run for every name). The checks are recx.testing's, the kit any plugin's tests
call too; this file gives each built-in name its settings and formulas. A name registered without an entry here
fails `test_every_registered_name_has_an_entry`: add its settings to SAMPLER_CASES / LOSS_CASES / MODEL_CASES /
FORMAT_CASES / METRIC_CASES (a tiny source per format, read back to the rows written; `synthetic` is generated).
RUNNERS, the runners, are covered through MODEL_CASES: every kind is some model case's `runner`, and
that case's run is checked to go through it.

Samplers: shapes, device, seed determinism, detached weights summing to 1, the log_q convention (one normaliser for
a query's positive and its candidates: log_q - positive_log_q equals the formula's log q(j) - log q(i)), closed forms
summing to one and followed by the draws, `exclude_train` honoured where offered. Losses: a finite scalar with
gradients, deterministic. Models: the public API (`representations`, `item_table`, `query`) only. Metrics: per-user
values independent of the batch, blind past the cut-off, higher for better lists, additive over the strata where
claimed. Every sampler, loss and model (and each VARIANT_CASES setting): a two-epoch run completes with finite
results, and lowers the training loss where the model trains.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch

from recx.config.run_config import resolve
from recx.data.formats.registry import FORMATS
from recx.eval.metrics.registry import METRICS
from recx.losses.registry import LOSSES
from recx.models.registry import MODELS
from recx.samplers.registry import SAMPLERS
from recx.testing import (
    check_loss_value,
    check_metric,
    check_model_api,
    check_sampler_draws,
    check_sampler_law,
    check_sampler_log_q,
    check_trains,
    make_sampler,
    random_batch,
    random_dataset,
)
from recx.testing.samplers import offers_exclude_train
from recx.training.runners.registry import RUNNERS


@dataclass
class SamplerCase:
    args: dict = field(default_factory=dict)
    loss: str = "softmax"
    n_negatives: int = 8
    train_args: dict = field(default_factory=dict)  # sampler_args for the training run


SAMPLER_CASES: dict[str, SamplerCase] = {
    "uniform": SamplerCase(),
    "popularity": SamplerCase({"variant": "pow0.75"}),
    "full": SamplerCase(loss="full_softmax"),
    "dns": SamplerCase({"m": 3, "n_candidates": 12}, loss="bpr"),
    "softmax_v": SamplerCase({"rho": 1.0, "n_candidates": 12}, loss="bpr"),
    "self_adversarial": SamplerCase(loss="bpr"),
    "in_batch": SamplerCase(),
    "in_batch_pop": SamplerCase(),
    "bir": SamplerCase({"n_resampled": 24}),
    "bir_iw": SamplerCase({"n_resampled": 24}),
    "xir": SamplerCase({"n_resampled": 24, "cache_size": 10, "cache_weight": 0.3}),
    "midx": SamplerCase({"n_codewords": 4}),
    "midx_uni": SamplerCase({"n_codewords": 4}),  # Eq. 4/5 also in test_samplers_midx.py
    "midx_pop": SamplerCase({"n_codewords": 4, "variant": "log"}),
    "kernel": SamplerCase({"alpha": 10.0, "leaf_size": 4}),
}


@dataclass
class LossCase:
    sampler: str = "uniform"
    n_negatives: int = 8
    args: dict = field(default_factory=dict)


LOSS_CASES: dict[str, LossCase] = {
    "bpr": LossCase(),
    "bce": LossCase(),
    "softmax": LossCase(),
    "full_softmax": LossCase(sampler="full"),
    "directau": LossCase(n_negatives=1, args={"gamma": 1.0}),
    "mawu": LossCase(n_negatives=1),
}


@dataclass
class ModelCase:
    args: dict = field(default_factory=dict)  # VAEs: no KL annealing or input dropout (both add epoch-to-epoch noise)
    trains: bool = True  # False: nothing to train (a completed run with results is checked instead)
    run: dict = field(default_factory=dict)  # extra run-config keys for the training run


MODEL_CASES: dict[str, ModelCase] = {
    "mf": ModelCase(),
    "nonlinear_mf": ModelCase(),
    "lightgcn": ModelCase({"n_layers": 2}),
    "popularity": ModelCase(trains=False),
    "multvae": ModelCase(
        {"hidden": 16, "anneal_cap": 0.0, "dropout": 0.0},
        run={"loss": "full_softmax", "sampler": "full", "batch_size": 32},
    ),
    "wrmf": ModelCase({"alpha": 4.0}),
    "rg2": ModelCase({"form": "text"}),  # form official's item half-step can raise the recorded loss (see rg.py)
    "rgx": ModelCase({"form": "text"}),
    "fastvae": ModelCase(
        {"hidden": 16, "anneal_cap": 0.0}, run={"loss": "softmax", "n_negatives": 20, "batch_size": 32}
    ),
}


def _write(name: str, text: str) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        (folder / name).write_text(text, encoding="utf-8")
        return folder / name

    return write


def _write_mat(folder: Path) -> Path:
    import scipy.io
    import scipy.sparse

    scipy.io.savemat(folder / "m.mat", {"data": scipy.sparse.csr_matrix(np.array([[0, 2.0, 0], [1.0, 0, 3.0]]))})
    return folder / "m.mat"


def _write_lightgcn(folder: Path) -> Path:
    (folder / "lightgcn").mkdir()
    (folder / "lightgcn" / "train.txt").write_text("0 1 2\n\n1 2\n")
    (folder / "lightgcn" / "test.txt").write_text("0 3\n")
    return folder / "lightgcn"


def _check_synthetic(read: Callable[..., dict[str, list[tuple]]]) -> None:
    """The generator: every user 0..5 has 1 to n_items // 2 distinct items in range, no rating or time; the seed
    fixes the draw and another seed gives another one."""
    options = {"seed": 3, "n_users": 6, "n_items": 10, "dim": 2, "mean_length": 3}
    rows = read(**options)["all"]
    assert rows == read(**options)["all"] and rows != read(**{**options, "seed": 4})["all"]
    assert all(rating is None and time is None for _, _, rating, time in rows)
    assert all(0 <= item < 10 for _, item, _, _ in rows) and len({(u, i) for u, i, _, _ in rows}) == len(rows)
    lengths = np.bincount([user for user, _, _, _ in rows], minlength=6)
    assert lengths.size == 6 and (lengths >= 1).all() and (lengths <= 5).all()


@dataclass
class FormatCase:
    """A tiny source in the format, written under a folder; what the reader gives: split -> (user, item, rating,
    timestamp) rows in file order (ids through their vocabulary; None for a column the format lacks; one split "all"
    for a single table), or, for a generated format, a `check` of the rows `read(**options)` gives."""

    source: Callable[[Path], Path | None]
    expected: dict[str, list[tuple]] = field(default_factory=dict)
    check: Callable | None = None
    ordered: bool = True


FORMAT_CASES: dict[str, FormatCase] = {
    "movielens": FormatCase(
        _write("ratings.dat", "1::122::5::838985046\r\n\r\n2::185::4.5::838983525\r\n"),
        {"all": [(1, 122, 5.0, 838985046), (2, 185, 4.5, 838983525)]},
    ),
    "netflix": FormatCase(
        _write("combined_data_1.txt", "7:\n11,3,2005-09-06\n12,5,1970-01-02\n8:\n11,1,1970-01-01\n"),
        {"all": [(11, 7, 3, 1125964800), (12, 7, 5, 86400), (11, 8, 1, 0)]},
    ),
    "amazon-ratings": FormatCase(
        _write("ratings.csv", "Aé,0001,5.0,12\nB,0001,2.0,13\n"),
        {"all": [("Aé", "0001", 5.0, 12), ("B", "0001", 2.0, 13)]},
    ),
    "amazon-reviews": FormatCase(
        _write(
            "reviews.json",
            '{"reviewerID": "A", "asin": "x1", "overall": 4.0, "unixReviewTime": 100, "reviewText": "ok"}\n'
            '{"reviewerID": "B", "asin": "x1", "overall": 1.0, "unixReviewTime": 7}\n',
        ),
        {"all": [("A", "x1", 4.0, 100), ("B", "x1", 1.0, 7)]},
    ),
    "yelp": FormatCase(
        _write(
            "yelp_academic_dataset_review.json",
            '{"review_id": "r", "user_id": "u1", "business_id": "b1", "stars": 4.0, "date": "1970-01-02 00:00:10"}\n',
        ),
        {"all": [("u1", "b1", 4.0, 86410)]},
    ),
    "gowalla-checkins": FormatCase(
        _write("loc-gowalla_totalCheckins.txt", "0\t1970-01-01T00:01:40Z\t30.2\t-97.7\t22847\n"),
        {"all": [(0, 22847, None, 100)]},
    ),
    "triplets": FormatCase(_write("t.txt", "3\t9\t1.5\n4\t9\t2\n"), {"all": [(3, 9, 1.5, None), (4, 9, 2.0, None)]}),
    "mat": FormatCase(_write_mat, {"all": [(0, 1, 2.0, None), (1, 0, 1.0, None), (1, 2, 3.0, None)]}, ordered=False),
    "lightgcn": FormatCase(
        _write_lightgcn,
        {
            "train": [(0, 1, None, None), (0, 2, None, None), (1, 2, None, None)],
            "test": [(0, 3, None, None)],
        },
    ),
    "synthetic": FormatCase(lambda folder: None, check=_check_synthetic),
}


METRIC_CASES = {
    "auc",
    "hitrate",
    "mrr",
    "ndcg",
    "precision",
    "recall",  # accuracy
    "arp",
    "aplt",
    "epc",  # per-user beyond accuracy
    "coverage",
    "gini",
    "entropy",
    "exposure",  # catalogue-level
}  # fmt: skip  (the kit's checks need no settings)


@pytest.mark.parametrize(
    "registry, table",
    [
        (SAMPLERS, SAMPLER_CASES),
        (LOSSES, LOSS_CASES),
        (MODELS, MODEL_CASES),
        (FORMATS, FORMAT_CASES),
        (METRICS, METRIC_CASES),
    ],
    ids=["samplers", "losses", "models", "formats", "metrics"],
)
def test_every_registered_name_has_an_entry(registry, table):
    assert set(registry.builtins()) == set(table), (
        f"{registry.kind} names without a contract entry: {sorted(set(registry.builtins()) - set(table))}; "
        f"entries for unregistered names: {sorted(set(table) - set(registry.builtins()))}"
    )


@pytest.mark.parametrize("name", sorted(SAMPLER_CASES))
def test_sampler_draws_are_well_formed_and_seeded(name):
    case = SAMPLER_CASES[name]
    check_sampler_draws(name, case.args, case.n_negatives)


@pytest.mark.parametrize("name", sorted(SAMPLER_CASES))
def test_every_sampler_carries_its_reference_law(name):
    """A built-in sampler's law lives with it: a reference formula of log_q - positive_log_q (float64), or a closed
    form; the check below then has something to check it against."""
    sampler = make_sampler(name, random_dataset(n_users=20, n_items=30, density=0.2), 8, 0, **SAMPLER_CASES[name].args)
    batch = random_batch(sampler.dataset, batch_size=6)
    has_formula = sampler.reference_log_q_gap(batch, sampler.sample(batch)) is not None
    assert has_formula or type(sampler).has_closed_form(), f"sampler {name!r}: no reference_log_q_gap, no closed form"


@pytest.mark.parametrize("name", sorted(SAMPLER_CASES))
def test_log_q_has_one_normaliser_for_positive_and_candidates(name):
    case = SAMPLER_CASES[name]
    check_sampler_log_q(name, case.args, None, case.n_negatives)


@pytest.mark.parametrize("name", sorted(SAMPLER_CASES))
def test_the_draws_follow_the_samplers_own_log_q(name, capsys):
    """Every sampler's draws against its own log q (and its closed form, where it has one); the samplers whose log q
    is a convention, not the law of their draws, say why (and are pinned by their reference_log_q_gap)."""
    check_sampler_law(name, SAMPLER_CASES[name].args)
    skipped = "the law of the draws is not checked" in capsys.readouterr().out
    assert skipped == bool(SAMPLERS.get(name).unchecked_law)
    assert skipped == (name in {"dns", "in_batch", "bir", "bir_iw", "xir"})


@pytest.mark.parametrize("name", sorted(SAMPLER_CASES))
def test_two_epochs_with_each_sampler_lower_the_training_loss(name, tmp_path):
    """The training loss, or for an adaptive sampler (its proposal moves with the model) the full-softmax loss on
    held-out pairs."""
    case = SAMPLER_CASES[name]
    settings = {"loss": case.loss, "sampler": name, "n_negatives": case.n_negatives, "sampler_args": case.args}
    check_trains(settings, tmp_path, adaptive=SAMPLERS.get(name).adaptive)


@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_is_a_finite_differentiable_scalar(name):
    case = LOSS_CASES[name]
    check_loss_value(name, case.args, case.sampler, case.n_negatives)


@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_two_epochs_with_each_loss_lower_the_training_loss(name, tmp_path):
    case = LOSS_CASES[name]
    settings = {"loss": name, "sampler": case.sampler, "n_negatives": case.n_negatives, "loss_args": case.args}
    check_trains(settings, tmp_path)


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_public_api_and_seed(name):
    check_model_api(name, MODEL_CASES[name].args)


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_trains_or_completes_without_training(name, tmp_path, monkeypatch):
    case = MODEL_CASES[name]
    looked_up = []
    get = RUNNERS.get
    monkeypatch.setattr(RUNNERS, "get", lambda kind: looked_up.append(kind) or get(kind))
    settings = {"model": name, "model_args": case.args, "loss": "bpr", "sampler": "uniform", "n_negatives": 1}
    run = check_trains({**settings, **case.run}, tmp_path, lowers_loss=case.trains)
    assert looked_up == [MODELS.get(name).runner]  # the model's runner ran it
    ndcg = run.results.query("split == 'test' and metric == 'ndcg' and k == 10 and stratum == 'all'")["value"]
    assert len(ndcg) == 1 and np.isfinite(ndcg).all()
    if not case.trains:
        assert run.best_epoch == 0 and not (run.path / "epochs.jsonl").exists()


@pytest.mark.parametrize("name", sorted(METRIC_CASES))
def test_metric_contract(name):
    check_metric(name)


# Settings beyond each name's own case (they were test_samplers_smoke.py and test_models_smoke.py; lightgcn with
# n_layers 2, in_batch and in_batch_pop with softmax are the cases above): each trains two epochs through train_run,
# ends complete with finite results, and lowers the training loss (the smoke tests' bound |loss| < 1e6 kept).
VARIANT_CASES: dict[str, dict] = {
    "uniform-exclude-bpr": {"sampler": "uniform", "loss": "bpr", "sampler_args": {"exclude_train": True}},
    "popularity-exclude-softmax": {
        "sampler": "popularity",
        "loss": "softmax",
        "sampler_args": {"variant": "pow0.75", "exclude_train": True},
    },
    "softmax_v-bce-form": {
        "sampler": "softmax_v",
        "loss": "bce",
        "sampler_args": {"rho": 0.5, "n_candidates": 20, "loss_form": "bce"},
    },
    "self_adversarial-temperature": {
        "sampler": "self_adversarial",
        "loss": "bpr",
        "sampler_args": {"temperature": 0.5},
    },
    "dns-m2-of-20": {"sampler": "dns", "loss": "bpr", "sampler_args": {"m": 2, "n_candidates": 20}},
    "softmax_v-20-candidates": {
        "sampler": "softmax_v",
        "loss": "bpr",
        "sampler_args": {"rho": 1.0, "n_candidates": 20},
    },
    "bir-defaults-softmax": {"sampler": "bir", "loss": "softmax"},
    "bir-exclude-bpr": {"sampler": "bir", "loss": "bpr", "sampler_args": {"exclude_train": True, "n_resampled": 16}},
    "xir-cache": {"sampler": "xir", "loss": "softmax", "sampler_args": {"cache_size": 16}},
    "bce-4-negatives": {"loss": "bce", "n_negatives": 4},
    "bce-batch-weight-decay": {"loss": "bce", "n_negatives": 4, "weight_decay": 1e-4, "weight_decay_mode": "batch"},
    "directau-prism-init": {"loss": "directau", "n_negatives": 1, "model_args": {"init": "prism"}},
    "mawu-weight-decay": {"loss": "mawu", "n_negatives": 1, "weight_decay": 1e-6},
    "nonlinear_mf-directau": {"model": "nonlinear_mf", "loss": "directau", "n_negatives": 1},
    "cosine-scoring": {
        "loss": "softmax",
        "n_negatives": 20,
        "model_args": {"scoring": "cosine", "temperature": 0.1},
    },
}


@pytest.mark.parametrize("label", sorted(VARIANT_CASES))
def test_variant_settings_lower_the_training_loss_and_complete(label, tmp_path):
    check_trains({"n_negatives": 8, **VARIANT_CASES[label]}, tmp_path)


def test_exclude_train_is_recorded_in_the_run_config():
    offered = [name for name in SAMPLERS.names() if offers_exclude_train(name)]
    assert {"uniform", "popularity", "dns", "softmax_v", "self_adversarial", "bir", "xir"} <= set(offered)
    for name in offered:
        assert "exclude_train" in resolve({"sampler": name}).sampler_args
    assert resolve({"sampler": "dns"}).sampler_args["exclude_train"] is True
    assert resolve({"sampler": "dns", "sampler_args": {"exclude_train": False}}).sampler_args["exclude_train"] is False


def _rows(raw) -> list[tuple]:
    def ids(which: str) -> list:
        values, vocab = getattr(raw, which), getattr(raw, f"{which}_vocab")
        return (values if vocab is None else vocab[values]).tolist()

    column = lambda values: [None] * len(raw) if values is None else values.tolist()  # noqa: E731
    return list(zip(ids("user"), ids("item"), column(raw.rating), column(raw.timestamp), strict=True))


@pytest.mark.parametrize("name", sorted(FORMAT_CASES))
def test_format_reads_the_interactions_written(name, tmp_path):
    case = FORMAT_CASES[name]

    def read(**options) -> dict[str, list[tuple]]:
        parts = FORMATS.get(name)(case.source(tmp_path), **options)
        return {split: _rows(raw) for split, raw in (parts.items() if isinstance(parts, dict) else [("all", parts)])}

    if case.check is not None:
        case.check(read)
        return
    got = read()
    assert got.keys() == case.expected.keys()
    for split, rows in case.expected.items():
        assert (got[split] if case.ordered else sorted(got[split])) == rows, split


def test_every_file_format_is_fuzzed():
    """tests/test_data_fuzz.py feeds arbitrary bytes to every reader of a file (`synthetic` reads none)."""
    from test_data_fuzz import FILES

    assert set(FORMATS.names()) == set(FILES) | {"synthetic"}


def test_every_training_kind_runs_for_a_model_case():
    """Each runner (RUNNERS) is the kind of at least one MODEL_CASES model, and that model's run uses it
    (test_model_trains_or_completes_without_training records the runner the training loop looked up)."""
    kinds = {MODELS.get(name).runner for name in MODEL_CASES}
    assert kinds == set(RUNNERS.names()), f"runners no model case runs: {sorted(set(RUNNERS.names()) - kinds)}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(SAMPLER_CASES))
def test_sampler_runs_on_the_model_device(name):
    dataset = random_dataset(n_users=30, n_items=50, density=0.2).to(torch.device("cuda"))
    batch = random_batch(random_dataset(n_users=30, n_items=50, density=0.2), batch_size=12, dim=4)
    batch = type(batch)(*(t.cuda() for t in (batch.users, batch.positives, batch.query, batch.item_table)))
    case = SAMPLER_CASES[name]
    sampler_class = SAMPLERS.get(name)
    sampler = sampler_class(
        dataset,
        case.n_negatives,
        sampler_class.Args(**case.args),
        torch.Generator(device="cuda").manual_seed(0),
        "torch",
    )
    negatives = sampler.sample(batch)
    assert negatives.items.is_cuda and negatives.log_q.is_cuda and negatives.positive_log_q.is_cuda
