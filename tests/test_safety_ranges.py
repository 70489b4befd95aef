"""Every numeric setting is checked against its range before any work starts: key, value, range and source named."""

import pytest
import yaml
from safety_helpers import assert_user_error, snapshot

from recx.config.run_config import RANGES, resolve
from recx.core.errors import RecxError

FAST = ["--dim", "8", "--epochs", "1", "--batch-size", "256", "--quiet", "--device", "cpu"]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--lr", "-0.1"], "lr = -0.1: expected a finite number > 0"),
        (["--lr", "nan"], "lr = nan: expected a finite number > 0"),
        (["--lr", "0"], "lr = 0.0: expected a finite number > 0"),
        (["--n-negatives", "-1"], "n_negatives = -1: expected an integer in [1, 10,000,000]"),
        (["--n-negatives", "0"], "n_negatives = 0: expected an integer in [1,"),
        (
            ["--n-negatives", "100000"],
            "n_negatives = 100000 is larger than the catalogue of dataset 'tiny' (100 items)",
        ),
        (["--weight-decay", "-1"], "weight_decay = -1.0: expected a finite number >= 0"),
        (["--patience", "-1"], "patience = -1: expected an integer in [1, 100,000]"),
        (["--dim", "1000000000"], "dim = 1000000000: expected an integer in [1, 65,536]"),
        (["--set", "epochs=true"], "epochs = True: expected an integer"),
        (["--set", "epochs=1.7"], "epochs = 1.7: expected an integer"),
        (["--set", "epochs=1e23"], "epochs = 1e+23: expected an integer"),
        (["--set", "sampler_args=5"], "sampler_args = 5: expected a mapping"),
        (["--set", "model_args.temperature=hot"], "model_args.temperature = 'hot': expected float"),
        (["--set", "batch_size=0"], "batch_size = 0: expected an integer in [1,"),
        (
            ["--set", "model_args.init_std=1.0"],
            "model_args.init_std = 1.0 applies only with init: normal (here init: xavier)",
        ),
        (["--set", "model_args.prism_alpha=0.5"], "model_args.prism_alpha = 0.5 applies only with init: prism"),
        (
            ["--set", "valid_metric=ndcg@" + "1" * 100_000],
            "valid_metric 'ndcg@"
            + "1" * 35
            + "'... (100,005 characters); expected a metric with a cut-off, such as ndcg@20",
        ),
        (
            ["--set", "valid_metric=ndcg@²"],
            "valid_metric 'ndcg@²'; expected a metric with a cut-off, such as ndcg@20 or recall@50",
        ),
    ],
)
def test_out_of_range_option_is_refused_before_any_work(tiny_root, tmp_path, recx_cli, args, expected):
    before = snapshot(tmp_path)
    run = tmp_path / "run"
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST, *args)
    assert_user_error(result, expected)
    assert snapshot(tmp_path) == before and not run.exists()


def test_config_file_value_names_the_file(tiny_root, tmp_path, recx_cli):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"dataset": "tiny", "lr": -1, "epochs": 1}))
    before = snapshot(tmp_path)
    result = recx_cli("train", "--config", config, "--data-root", tiny_root)
    assert_user_error(result, f"{config}: lr = -1: expected a finite number > 0")
    assert snapshot(tmp_path) == before


COMPANIONS = {"lr_step_gamma": {"lr_step_epochs": 5}}  # keys that apply only beside another setting


@pytest.mark.parametrize("key", sorted(RANGES))
def test_every_range_refuses_its_edges_and_accepts_its_bounds(key):
    bounds, beside = RANGES[key], COMPANIONS.get(key, {})
    below = bounds.low if bounds.low_open else bounds.low - 1
    with pytest.raises(RecxError, match=rf"{key} = "):
        resolve({key: bounds.kind(below), **beside})
    if bounds.high != float("inf"):
        with pytest.raises(RecxError, match=rf"{key} = "):
            resolve({key: bounds.kind(bounds.high) + 1, **beside})
        assert getattr(resolve({key: bounds.kind(bounds.high), **beside}), key) == bounds.high
    with pytest.raises(RecxError, match=rf"{key} = True"):
        resolve({key: True, **beside})


def test_eval_batch_size_and_split_ratios(tiny_root, tmp_path, recx_cli):
    before = snapshot(tmp_path)
    assert_user_error(
        recx_cli("eval", tmp_path / "none", "--batch-size", "0"), "--batch-size 0: expected an integer >= 1"
    )
    assert_user_error(
        recx_cli("prepare", "r", "--format", "synthetic", "--ratios", "80/30", "--data-root", tiny_root),
        "--ratios '80/30': the parts sum to 110; expected percentages summing to 100",
    )
    assert not (tiny_root / "r").exists()
    assert snapshot(tmp_path) == before


def test_sweep_validates_every_run_before_the_first(tmp_path, recx_cli):
    spec = {
        "datasets": {
            "tiny": {
                "format": "synthetic",
                "ratios": "80/10/10",
                "synthetic": {"n_users": 50, "n_items": 40, "mean_length": 8},
            }
        },
        "experiments": {
            "bad": {
                "datasets": ["tiny"],
                "defaults": {"dim": 4, "epochs": 1, "device": "cpu"},
                "methods": {"bpr-uniform": {"loss": "bpr", "n_negatives": 2}},
                "grid": {"lr": [0.01, -1]},
            }
        },
    }
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    before = snapshot(tmp_path)
    result = recx_cli("sweep", path, "-e", "bad", "--out", tmp_path / "out", "--data-root", tmp_path / "data")
    assert_user_error(result, str(path), "experiment 'bad'", "method 'bpr-uniform'", "lr = -1: expected a finite")
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "out").exists() and not (tmp_path / "data").exists()


def test_sweep_checks_negatives_against_a_prepared_catalogue_before_the_first_run(tiny_root, tmp_path, recx_cli):
    spec = {
        "experiments": {
            "big": {
                "datasets": ["tiny"],
                "defaults": {"dim": 4, "epochs": 1, "device": "cpu"},
                "methods": {"ok": {"loss": "bpr", "n_negatives": 2}, "huge": {"loss": "bpr", "n_negatives": 5000}},
            }
        }
    }
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = recx_cli("sweep", path, "-e", "big", "--out", tmp_path / "out", "--data-root", tiny_root)
    assert_user_error(result, "method 'huge'", "n_negatives = 5000 is larger than the catalogue")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"loss": "bpr"},
        {"model_args": {"init": "normal", "init_std": 1.0}},
        {"model_args": {"init": "prism", "prism_alpha": 0.5}},
    ],
)
def test_a_resolved_config_resolves_again_to_itself(raw):
    """Sweep workers and `recx eval` resolve a saved config.yaml again: its filled-in defaults must not trip a check
    (such as init_std's, which needs init: normal only when set to other than its default)."""
    config = resolve(raw)
    assert resolve(config.to_dict()).to_dict() == config.to_dict()
