"""A method that fixes the grid's keys is planned once per seed; dotted grid keys and per-method grids; single-seed
tables render; prism-gowalla plans."""

from pathlib import Path

import pandas as pd
import pytest

from recx.config.run_config import RunConfig
from recx.core.errors import RecxError
from recx.models.registry import MODELS
from recx.reports import tables
from recx.samplers.registry import SAMPLERS
from recx.sweeps.experiments import experiment_spec, load_experiments, plan

ROOT = Path(__file__).resolve().parents[1]


def test_method_overriding_the_grid_is_planned_once_per_seed():
    spec = {
        "datasets": ["d"],
        "seeds": [0, 1],
        "grid": {"weight_decay": [1e-4, 1e-6]},
        "defaults": {"model": "mf", "loss": "bpr", "n_negatives": 1},
        "methods": {
            "tuned": {"weight_decay_mode": "full"},
            "fixed": {"weight_decay": 0.0, "weight_decay_mode": "none"},
        },
    }
    runs = plan(spec, "x", Path("e.yaml"))
    by_method = pd.Series([r.method for r in runs]).value_counts().to_dict()
    assert by_method == {"tuned": 4, "fixed": 2}
    assert all(r.grid_point == {} for r in runs if r.method == "fixed")


def test_a_grid_key_forced_by_set_is_not_the_runs_grid_point():
    """`--set lr=0.01` on an experiment whose grid tunes lr: one run per seed, whose grid point names no lr (it once
    named the grid's first value, 0.1, beside a config at 0.01)."""
    spec = {
        "datasets": ["d"],
        "seeds": [0],
        "grid": {"lr": [0.1, 0.01, 0.001], "weight_decay": [0.0, 1e-4]},
        "defaults": {"model": "mf", "loss": "bpr", "n_negatives": 1, "optimizer": "adam"},
        "methods": {"tuned": {}},
    }
    runs = plan(spec, "x", Path("e.yaml"), forced={"lr": 0.01})
    assert [(r.config.lr, r.grid_point) for r in runs] == [
        (0.01, {"weight_decay": 0.0}),
        (0.01, {"weight_decay": 1e-4}),
    ]


def test_dotted_grid_keys_set_nested_args_and_a_method_grid_replaces_the_experiments():
    spec = {
        "datasets": ["d"],
        "seeds": [0],
        "grid": {"lr": [0.1, 0.01], "model_args.init_std": [0.1, 1.0]},
        "defaults": {"model": "mf", "loss": "bpr"},
        "methods": {
            "sgd": {"model_args": {"init": "normal"}},
            "wrmf": {
                "model": "wrmf",
                "grid": {"model_args.alpha": [1.0, 4.0], "model_args.regularization": [0.1, 0.01]},
            },
            "wrmf-fixed-alpha": {
                "model": "wrmf",
                "model_args": {"alpha": 2.0},
                "grid": {"model_args.alpha": [1.0, 4.0]},
            },
        },
    }
    runs = plan(spec, "x", Path("e.yaml"))
    sgd = [r for r in runs if r.method == "sgd"]
    assert sorted((r.config.lr, r.config.model_args["init_std"]) for r in sgd) == [
        (0.01, 0.1),
        (0.01, 1.0),
        (0.1, 0.1),
        (0.1, 1.0),
    ]
    assert all(r.config.model_args["init"] == "normal" for r in sgd)  # the method's nested key merges with the grid's
    wrmf = [r for r in runs if r.method == "wrmf"]
    assert sorted((r.config.model_args["alpha"], r.config.model_args["regularization"]) for r in wrmf) == [
        (1.0, 0.01),
        (1.0, 0.1),
        (4.0, 0.01),
        (4.0, 0.1),
    ]
    assert {r.config.lr for r in wrmf} == {RunConfig().lr}  # the experiment's lr grid is not this method's
    assert all(set(r.grid_point) == {"model_args.alpha", "model_args.regularization"} for r in wrmf)
    fixed = [r for r in runs if r.method == "wrmf-fixed-alpha"]
    assert len(fixed) == 1 and fixed[0].config.model_args["alpha"] == 2.0 and fixed[0].grid_point == {}


def test_per_dataset_keys_apply_to_their_dataset_only():
    spec = {
        "datasets": ["big", "small"],
        "seeds": [0],
        "grid": {"n_negatives": [10, 20]},
        "defaults": {"model": "mf", "loss": "softmax", "sampler": "popularity"},
        "methods": {
            "m": {
                "n_negatives": 100,
                "sampler_args": {"variant": "log"},
                "per_dataset": {"small": {"n_negatives": 5, "lr": 0.5}},
            }
        },
    }
    runs = {r.config.dataset: r for r in plan(spec, "x", Path("e.yaml"))}
    assert (runs["big"].config.n_negatives, runs["big"].config.lr) == (100, RunConfig().lr)
    assert (runs["small"].config.n_negatives, runs["small"].config.lr) == (5, 0.5)
    assert runs["small"].config.sampler_args["variant"] == "log"  # the method's other keys stay
    assert runs["small"].grid_point == {}  # the per-dataset key fixes the grid's


@pytest.mark.parametrize(
    "per_dataset, message",
    [
        ({"other": {"lr": 0.1}}, "per_dataset: 'other' is not one of the experiment's datasets"),
        ({"d": 0.1}, r"per_dataset.d: expected a mapping"),
        ([0.1], "per_dataset: expected a mapping of dataset name"),
    ],
)
def test_a_per_dataset_entry_for_an_unknown_dataset_or_not_a_mapping_is_refused(per_dataset, message):
    content = {"experiments": {"x": {"datasets": ["d"], "methods": {"m": {"per_dataset": per_dataset}}}}}
    with pytest.raises(RecxError, match=f"experiments.x.methods.m.{message}"):
        experiment_spec(content, "x", Path("e.yaml"))


def test_fastvae_table3_draws_the_papers_sample_size_per_dataset():
    path = ROOT / "experiments.yaml"
    content = load_experiments(path)
    runs = plan(experiment_spec(content, "fastvae-table3", path), "fastvae-table3", path)
    negatives = {(r.config.dataset, r.method): r.config.n_negatives for r in runs if r.method.startswith("fastvae")}
    assert set(negatives.values()) == {1000, 200}
    assert all(n == (1000 if dataset == "gowalla-fastvae" else 200) for (dataset, _), n in negatives.items())


@pytest.mark.parametrize("experiment", ["fastvae-table3", "fastvae-samplers", "fastvae-scaling"])
def test_fastvae_popularity_is_log_of_one_plus_count_as_the_paper(experiment):
    path = ROOT / "experiments.yaml"
    content = load_experiments(path)
    runs = [
        r
        for r in plan(experiment_spec(content, experiment, path), experiment, path)
        if r.config.sampler in ("popularity", "midx_pop")
    ]
    assert runs
    for run in runs:
        args = SAMPLERS.get(run.config.sampler).Args(**run.config.sampler_args)
        assert args.variant == "log" and args.smoothing == 0  # pop = log(1 + count) exactly


OFFICIAL_RECIPE = {"dropout_at": "hidden", "input_init": "normal", "encoder_bias": False, "anneal_cap": 0.0}


@pytest.mark.parametrize("experiment", ["fastvae-table3", "fastvae-samplers", "fastvae-scaling"])
def test_fastvae_rows_train_the_official_recipe(experiment):
    """Mult-VAE and FastVAE rows follow the official code (HERECJ/FastVae_Gpu, run_mm.py / vae_models.py); only
    rows named -text keep the paper's text reading (the models' defaults)."""
    path = ROOT / "experiments.yaml"
    content = load_experiments(path)
    runs = [
        r
        for r in plan(experiment_spec(content, experiment, path), experiment, path)
        if r.config.model in ("multvae", "fastvae")
    ]
    assert runs
    for run in runs:
        args = MODELS.get(run.config.model).Args(**run.config.model_args)
        official = all(getattr(args, key) == value for key, value in OFFICIAL_RECIPE.items())
        official = official and run.config.lr_step_epochs == 5 and run.config.lr_step_gamma == 0.95
        assert official == (not run.method.endswith("-text")), run.method
        if official:
            assert args.item_bias == (run.config.model == "multvae")
            assert args.item_init == (
                "normal" if run.config.model == "fastvae" and "uniform-items" not in run.method else "uniform"
            )


@pytest.mark.parametrize("grid", [{"lr": []}, {"lr": 0.1}, [0.1]])
def test_a_grid_that_plans_nothing_is_refused(grid):
    spec = {"datasets": ["d"], "defaults": {"model": "mf", "loss": "bpr"}, "methods": {"m": {"grid": grid}}}
    with pytest.raises(RecxError, match="methods.m.*grid"):
        plan(spec, "x", Path("e.yaml"))


def test_single_seed_table_renders_without_spread():
    results = pd.DataFrame(
        {"dataset": "d", "method": ["a"], "split": "test", "metric": "ndcg", "k": 20, "stratum": "all", "value": [0.25]}
    )
    assert "0.2500" in tables.to_markdown(tables.summary(results))


def test_prism_gowalla_plans_every_method():
    path = ROOT / "experiments.yaml"
    runs = plan(experiment_spec(load_experiments(path), "prism-gowalla", path), "prism-gowalla", path)
    methods = {r.method for r in runs}
    losses = ("bpr", "ssm", "directau-g1", "directau-g2", "directau-g5", "mawu")
    assert {f"{loss}+{mode}" for loss in losses for mode in ("wd", "prism")} == methods
    assert all(r.config.model_args["init"] == "prism" for r in runs if r.method.endswith("prism"))
    # the paper's Appendix B.1: lr x weight-decay grid, PRISM without decay, batch sizes, cosine SSM with 10 negatives
    assert {(r.config.lr, r.config.weight_decay) for r in runs if r.method == "bpr+wd" and r.config.seed == 0} == {
        (lr, wd) for lr in (0.1, 0.01, 0.001) for wd in (0.0, 1e-4, 1e-6, 1e-8)
    }
    assert all(r.config.weight_decay == 0.0 for r in runs if r.method.endswith("prism"))
    assert all(r.config.batch_size == (16384 if r.method.split("+")[0] in ("bpr", "ssm") else 4096) for r in runs)
    assert all(
        r.config.model_args["scoring"] == "cosine" and r.config.n_negatives == 10
        for r in runs
        if r.method.startswith("ssm")
    )
    assert all(r.config.epochs == 1000 and r.config.patience == 10 for r in runs)


def test_paper_experiments_state_their_scoring_and_optimizer_rather_than_take_recx_defaults():
    """recx's per-loss bundles (cosine / 0.1 for the softmax losses, Adagrad for BPR) are for a first run; a paper's
    experiment must run the paper's scores and optimizer, so none of it may come from a bundle."""
    path = ROOT / "experiments.yaml"
    content = load_experiments(path)
    for name in content["experiments"]:
        if name == "quickstart":
            continue
        for run in plan(experiment_spec(content, name, path), name, path):
            filled = set(getattr(run.config, "loss_defaults_applied", {}))
            assert not filled - {"n_negatives"}, (name, run.method, filled)
    bir = plan(experiment_spec(content, "bir-batch-size", path), "bir-batch-size", path)
    assert {(r.config.model_args["scoring"], r.config.model_args["temperature"]) for r in bir} == {("dot", 1.0)}


def test_rg_table3_tunes_each_method_over_its_own_grid():
    path = ROOT / "experiments.yaml"
    spec = {**experiment_spec(load_experiments(path), "rg-table3", path), "datasets": ["ml10m"], "seeds": [0]}
    runs = plan(spec, "rg-table3", path)
    counts = pd.Series([r.method for r in runs]).value_counts().to_dict()
    assert counts == {"bpr": 12, "bce": 12, "ssm": 12, "sm": 12, "wrmf": 20, "rg2": 49, "rgx": 343}
    assert {tuple(sorted(r.grid_point)) for r in runs if r.method == "wrmf"} == {
        ("model_args.alpha", "model_args.regularization")
    }
    assert {r.config.model_args["beta"] for r in runs if r.method == "rgx"} == {1.0, 0.5, 0.1, 0.05, 0.01, 0.005, 0.001}


def test_every_reduced_experiment_the_fidelity_note_cites_plans():
    path = ROOT / "docs" / "reduced-experiments.yaml"
    content = load_experiments(path)
    for name in content["experiments"]:
        assert plan(experiment_spec(content, name, path), name, path)
