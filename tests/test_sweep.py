"""`recx sweep`: expansion, skipping completed runs, long-format results and tables."""

import json
import re

import pandas as pd
import yaml
from sweep_helpers import tiny_experiment

EXPERIMENT = tiny_experiment(
    "small",
    {"dim": 8, "epochs": 2, "batch_size": 256},
    {
        "bpr": {"loss": "bpr", "n_negatives": 2},
        "ssm-pop": {"loss": "softmax", "sampler": "popularity", "n_negatives": 20},
    },
    grid={"lr": [0.01, 0.001]},
)


def test_sweep_runs_skips_and_tabulates(tmp_path, recx_cli):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    out, data = tmp_path / "out", tmp_path / "data"
    result = recx_cli("sweep", path, "--experiment", "small", "--out", out, "--data-root", data)
    assert result.code == 0, result.err
    assert "8 runs, 0 already complete" in result.out
    # each run's lines name its method (two methods may share loss+sampler: mawu+wd and mawu+prism)
    assert "ssm-pop epoch 2/2" in result.out and "softmax+popularity epoch" not in result.out
    assert len(re.findall(r"run [0-9a-f]{12} \(ssm-pop\): set: ", result.out)) == 4
    results = pd.read_parquet(out / "results.parquet")
    for column in ["run_id", "dataset", "model", "loss", "sampler", "seed", "split", "metric", "k", "stratum", "value"]:
        assert column in results.columns
    # each method is reported at one grid point (the best by validation), over both seeds
    test = results[
        (results.split == "test") & (results.metric == "ndcg") & (results.k == 20) & (results.stratum == "all")
    ]
    assert sorted(test.method.unique()) == ["bpr", "ssm-pop"] and len(test) == 4
    table = (out / "table.md").read_text()
    assert "NDCG@20 unpopular" in table and "±" in table and "ssm-pop" in table
    assert (out / "table.csv").is_file() and (out / "table.tex").is_file()

    run_dirs = sorted(p for p in (out / "runs").iterdir() if p.is_dir())  # beside them: hidden lock files
    assert len(run_dirs) == 8
    (run_dirs[0] / "COMPLETE").unlink()
    again = recx_cli("sweep", path, "--experiment", "small", "--out", out, "--data-root", data)
    assert again.code == 0 and "8 runs, 7 already complete" in again.out


def test_unknown_experiment_and_bad_method_key(tmp_path, recx_cli):
    path = tmp_path / "experiments.yaml"
    broken = yaml.safe_load(yaml.safe_dump(EXPERIMENT))
    broken["experiments"]["small"]["methods"]["bpr"]["lossx"] = "bpr"
    path.write_text(yaml.safe_dump(broken))
    result = recx_cli("sweep", path, "--experiment", "nope")
    assert result.code == 1 and "no experiment 'nope'" in result.err
    result = recx_cli("sweep", path, "--experiment", "small", "--dry-run")
    assert result.code == 1 and "lossx" in result.err and "methods.bpr" in result.err.replace("\n", "")


def test_command_line_overrides_datasets_seeds_and_keys(tmp_path, recx_cli):
    spec = yaml.safe_load(yaml.safe_dump(EXPERIMENT))
    spec["datasets"]["other"] = dict(spec["datasets"]["tiny"], seed=3)
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    result = recx_cli(
        "sweep",
        path,
        "-e",
        "small",
        "--out",
        out,
        "--data-root",
        tmp_path / "data",
        "--dataset",
        "other",
        "--seeds",
        "4",
        "--set",
        "epochs=1",
        "--set",
        "sampler_args.exclude_train=true",
    )
    assert result.code == 0, result.err
    configs = [yaml.safe_load(p.read_text()) for p in (out / "runs").glob("*/config.yaml")]
    assert len(configs) == 4
    assert {c["dataset"] for c in configs} == {"other"} and {c["seed"] for c in configs} == {4}
    assert {c["epochs"] for c in configs} == {1}
    assert all(c["sampler_args"]["exclude_train"] is True for c in configs)


def test_a_sweep_waits_for_a_dataset_another_process_is_preparing(tmp_path, monkeypatch):
    """Two sweeps started at once: the one that finds the dataset's lock held waits, then uses the prepared data."""
    import recx.sweeps.sweep as sweep_module
    from recx.core.lock import LockedError

    card = tmp_path / "data" / "tiny" / "card.json"
    calls = []

    def busy_then_prepared(content, dataset, data_root, base):
        calls.append(dataset)
        if len(calls) == 1:
            card.parent.mkdir(parents=True)
            card.write_text("{}")  # the other process finishes while this one waits
            raise LockedError("dataset tiny is being written by process 1")
        raise AssertionError("prepared twice")

    monkeypatch.setattr(sweep_module, "_prepare_from_recipe", busy_then_prepared)
    monkeypatch.setattr(sweep_module.time, "sleep", lambda seconds: None)
    sweep_module.ensure_dataset({}, "tiny", tmp_path / "data", tmp_path)
    assert calls == ["tiny"]


def test_methods_option_runs_only_the_named_methods_and_names_an_unknown_one(tmp_path, recx_cli):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    out = tmp_path / "out"
    first = sorted(EXPERIMENT["experiments"]["small"]["methods"])[0]
    result = recx_cli(
        "sweep", path, "-e", "small", "--out", out, "--data-root", tmp_path / "data", "--dry-run", "--methods", first
    )
    assert result.code == 0, result.err
    others = set(EXPERIMENT["experiments"]["small"]["methods"]) - {first}
    assert first in result.out and not any(f" {m} " in result.out for m in others)
    wrong = recx_cli("sweep", path, "-e", "small", "--out", out, "--data-root", tmp_path / "data", "--methods", "nope")
    assert wrong.code == 1 and "--methods:" in wrong.err and "'nope'" in wrong.err and "Traceback" not in wrong.err


def test_a_sweep_narrowed_to_one_method_keeps_the_other_methods_complete_runs_in_its_tables(tmp_path, recx_cli):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    out, data = tmp_path / "out", tmp_path / "data"
    assert recx_cli("sweep", path, "-e", "small", "--out", out, "--data-root", data, "--seeds", "0").code == 0
    before = pd.read_parquet(out / "results.parquet")
    rerun = recx_cli(
        "sweep", path, "-e", "small", "--out", out, "--data-root", data, "--seeds", "0", "--methods", "bpr"
    )
    assert rerun.code == 0, rerun.err
    after = pd.read_parquet(out / "results.parquet")
    assert set(after.method) == set(before.method) == {"bpr", "ssm-pop"}
    assert len(after) == len(before)


def test_a_set_key_that_only_the_selected_method_has_does_not_fail_the_tables(tmp_path, recx_cli):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    out, data = tmp_path / "out", tmp_path / "data"
    result = recx_cli(
        "sweep",
        path,
        "-e",
        "small",
        "--out",
        out,
        "--data-root",
        data,
        "--seeds",
        "0",
        "--methods",
        "ssm-pop",
        "--set",
        "sampler_args.variant=log",
    )
    assert result.code == 0, result.err
    assert set(pd.read_parquet(out / "results.parquet").method) == {"ssm-pop"}


def test_a_sweep_counts_its_runs_before_building_them(tmp_path, recx_cli, monkeypatch):
    """A grid of 4^10 points x 2 seeds x 2 methods is refused at once with its count (its --dry-run printed nothing
    in 150 s and grew to 750 MB); --max-runs raises the limit (issue 37, item 5)."""
    spec = yaml.safe_load(yaml.safe_dump(EXPERIMENT))
    spec["experiments"]["small"]["grid"] = {f"model_args.k{index}": [1, 2, 3, 4] for index in range(10)}
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    from recx.sweeps import experiments

    def built(*args, **kwargs):
        raise AssertionError("the runs were built before they were counted")

    monkeypatch.setattr(experiments, "grid_points", built)  # refused from the grid's sizes: none is ever built
    result = recx_cli("sweep", path, "--experiment", "small", "--dry-run")
    assert result.code == 1, result.err
    assert "experiment 'small' makes 4,194,304 runs (datasets x grid points x seeds), more than the 10,000" in (
        result.err
    )
    assert "--max-runs 4194304" in result.err
    monkeypatch.undo()
    path.write_text(yaml.safe_dump(EXPERIMENT))
    assert "makes 8 runs" in recx_cli("sweep", path, "--experiment", "small", "--dry-run", "--max-runs", "7").err
    allowed = recx_cli("sweep", path, "--experiment", "small", "--dry-run", "--max-runs", "8")
    assert allowed.code == 0 and "8 runs, 0 already complete" in allowed.out


def test_a_dry_run_says_which_datasets_are_missing_and_how_they_would_be_prepared(tmp_path, recx_cli):
    spec = {**EXPERIMENT, "datasets": {**EXPERIMENT["datasets"], "gone": {"format": "lightgcn", "source": "nowhere"}}}
    spec["experiments"] = {"small": {**EXPERIMENT["experiments"]["small"], "datasets": ["tiny", "gone", "absent"]}}
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = recx_cli("sweep", path, "-e", "small", "--dry-run", "--data-root", tmp_path / "data")
    assert result.code == 0, result.err
    text = " ".join(result.out.split())
    assert f"dataset tiny: not prepared under {tmp_path / 'data'} yet: the sweep prepares it (synthetic" in text
    assert (
        f"dataset gone: not prepared under {tmp_path / 'data'}, and its source {tmp_path / 'nowhere'} does not exist"
        in text
    )
    assert "dataset absent: not prepared under" in text and "has no recipe for it in 'datasets'" in text
    assert not (tmp_path / "data").exists()  # a dry run prepares nothing


def test_the_tables_of_a_stopped_sweep_hold_its_complete_runs_and_train_nothing(tmp_path, recx_cli):
    """What a sweep stopped midway finished is reported (bench/gpu_headlines.py after its time budget): a method with
    some grid points complete keeps its row at the best of those, a method with none is left out, nothing trains."""
    import io

    from rich.console import Console

    from recx.reports.report import report_sweep
    from recx.runs import store
    from recx.sweeps.experiments import plan
    from recx.sweeps.sweep import finished_tables

    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    out, data = tmp_path / "out", tmp_path / "data"
    assert recx_cli("sweep", path, "-e", "small", "--out", out, "--data-root", data, "--seeds", "0").code == 0
    spec = {**EXPERIMENT["experiments"]["small"], "seeds": [0]}
    planned = {run.run_id: run.method for run in plan(spec, "small", path)}
    bpr_kept, bpr_stopped = sorted(run_id for run_id, method in planned.items() if method == "bpr")
    for run_id in [bpr_stopped, *(run_id for run_id, method in planned.items() if method == "ssm-pop")]:
        (out / "runs" / run_id / "COMPLETE").unlink()  # stopped in training
        (out / "runs" / run_id / "INCOMPLETE").write_text("training started; not finished\n")
    (out / "results.parquet").unlink()
    before = {folder.name: store.state(folder) for folder in (out / "runs").iterdir() if folder.is_dir()}

    outcome = finished_tables(path, "small", out)
    assert outcome is not None
    assert set(outcome.results.run_id) == {bpr_kept} and set(outcome.results.method) == {"bpr"}
    assert set(pd.read_parquet(out / "results.parquet").run_id) == {bpr_kept}
    record = json.loads((out / "experiment.json").read_text())
    assert record["run"]["tiny"] == {"bpr": {"grid_points": 1, "seeds": 1}}
    assert record["planned"]["tiny"]["bpr"] == {"grid_points": 2, "seeds": 2}
    report_sweep(outcome, Console(file=io.StringIO(), width=200))
    assert "bpr" in (out / "table.md").read_text() and "ssm-pop" not in (out / "table.md").read_text()
    assert {folder.name: store.state(folder) for folder in (out / "runs").iterdir() if folder.is_dir()} == before

    (out / "runs" / bpr_kept / "COMPLETE").unlink()
    assert finished_tables(path, "small", out) is None
