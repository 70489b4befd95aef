"""A method that fixes the grid's keys is planned once per seed; single-seed tables render; prism-gowalla plans."""
from pathlib import Path

import pandas as pd

from recx.eval import tables
from recx.sweep import load_experiments, experiment_spec, plan

ROOT = Path(__file__).resolve().parents[1]


def test_method_overriding_the_grid_is_planned_once_per_seed():
    spec = {"datasets": ["d"], "seeds": [0, 1], "grid": {"weight_decay": [1e-4, 1e-6]},
            "defaults": {"model": "mf", "loss": "bpr", "n_negatives": 1},
            "methods": {"tuned": {"weight_decay_mode": "full"},
                        "fixed": {"weight_decay": 0.0, "weight_decay_mode": "none"}}}
    runs = plan(spec, "x", Path("e.yaml"))
    by_method = pd.Series([r.method for r in runs]).value_counts().to_dict()
    assert by_method == {"tuned": 4, "fixed": 2}
    assert all(r.grid_point == {} for r in runs if r.method == "fixed")


def test_single_seed_table_renders_without_spread():
    results = pd.DataFrame({"dataset": "d", "method": ["a"], "split": "test", "metric": "ndcg", "k": 20,
                            "stratum": "all", "value": [0.25]})
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
        (lr, wd) for lr in (0.1, 0.01, 0.001) for wd in (0.0, 1e-4, 1e-6, 1e-8)}
    assert all(r.config.weight_decay == 0.0 for r in runs if r.method.endswith("prism"))
    assert all(r.config.batch_size == (16384 if r.method.split("+")[0] in ("bpr", "ssm") else 4096) for r in runs)
    assert all(r.config.model_args["scoring"] == "cosine" and r.config.n_negatives == 10
               for r in runs if r.method.startswith("ssm"))
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
