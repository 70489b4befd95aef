"""`--track mlflow`: each completed run read back through MLflow's own client (skipped without the track extra)."""

import json

import pytest
import yaml

from recx.core.errors import RecxError
from recx.runs import tracking

mlflow = pytest.importorskip("mlflow")

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "5", "--device", "cpu", "--quiet"]
EXPERIMENT = {
    "datasets": {
        "tiny": {
            "format": "synthetic",
            "ratios": "80/10/10",
            "synthetic": {"n_users": 120, "n_items": 60, "mean_length": 10},
        }
    },
    "experiments": {
        "small": {
            "datasets": ["tiny"],
            "seeds": [0],
            "ks": [5],
            "defaults": {"dim": 8, "epochs": 2, "batch_size": 256, "device": "cpu"},
            "methods": {"bpr": {"loss": "bpr", "n_negatives": 2}, "ssm": {"loss": "softmax", "n_negatives": 5}},
            "track": "mlflow",
        }
    },
}


def _client(folder):
    return mlflow.MlflowClient(f"sqlite:///{(folder / 'mlflow.db').resolve()}")


def _runs(client, experiment):
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found else []


def test_train_logs_config_histories_final_metrics_and_files(tiny_root, tmp_path, recx_cli):
    run = tmp_path / "runs" / "tracked"
    result = recx_cli(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST, "--track", "mlflow"
    )
    assert result.code == 0 and "warning" not in result.err, result.err
    client = _client(run.parent)
    [logged] = _runs(client, tracking.TRAIN_EXPERIMENT)
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert logged.data.params["dim"] == "8" and logged.data.params["loss"] == config["loss"]
    assert logged.data.tags["recx.run_id"] == "tracked"
    losses = client.get_metric_history(logged.info.run_id, "loss")
    epochs = [json.loads(line) for line in (run / "epochs.jsonl").read_text().splitlines()]
    assert [(m.step, m.value) for m in losses] == [(e["epoch"], pytest.approx(e["loss"])) for e in epochs]
    assert [m.step for m in client.get_metric_history(logged.info.run_id, "valid_ndcg_at_20")] == [1, 2]
    assert {"test/ndcg_at_10", "test/ndcg_at_10/popular", "valid/recall_at_20/unpopular"} <= set(logged.data.metrics)
    artifacts = {item.path for item in client.list_artifacts(logged.info.run_id)}
    assert {"config.yaml", "epochs.jsonl", "results.parquet", "COMPLETE"} <= artifacts


def test_tracking_changes_nothing_of_the_run(tiny_root, tmp_path, recx_cli, monkeypatch, train_tiny):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    plain = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "a", *FAST)
    tracked = train_tiny(
        tmp_path / "b",
        *FAST,
        "--track",
        "mlflow",
        "--track-uri",
        f"sqlite:///{tmp_path / 'elsewhere.db'}",
    )
    assert plain.code == tracked.code == 0
    assert (tmp_path / "a" / "config.yaml").read_text() == (tmp_path / "b" / "config.yaml").read_text()
    assert not (tmp_path / "mlflow.db").exists() and (tmp_path / "elsewhere.db").is_file()
    assert (tmp_path / "mlartifacts").is_dir() and not any((tmp_path / "cwd").iterdir())  # not in the cwd


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("unknown-scheme://nowhere", "store unknown-scheme://nowhere does not open"),
        ("http://127.0.0.1:9", "store http://127.0.0.1:9 does not open (MlflowException: API request"),
        (None, "mlflow.db does not open (DatabaseError: (sqlite3.DatabaseError) file is not a database)"),
    ],
)
def test_a_store_that_does_not_open_is_refused_before_any_work(tiny_root, tmp_path, recx_cli, uri, expected):
    """An invalid or unreachable --track-uri, or a default store this mlflow cannot open, was one warning after the
    whole run (issue 37, item 6)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "mlflow.db").write_text("not a database")
    run = tmp_path / "runs" / "r"
    uri_args = ("--track-uri", uri) if uri else ()
    result = recx_cli(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST, "--track", "mlflow", *uri_args
    )
    assert result.code == 1 and "internal error" not in result.err, result.err
    message = " ".join(result.err.split())
    assert "error: --track mlflow: the MLflow store " in message and expected in message
    assert message.endswith("or leave out tracking")
    assert not run.exists() and (tmp_path / "runs" / "mlflow.db").read_text() == "not a database"


def test_a_tracking_failure_after_the_runs_is_one_warning_and_the_run_completes(
    tiny_root, tmp_path, recx_cli, monkeypatch
):
    def unreachable(self, run):
        raise ConnectionError("the server went away")

    monkeypatch.setattr(tracking._Store, "log", unreachable)
    run = tmp_path / "r"
    result = recx_cli(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST, "--track", "mlflow"
    )
    assert result.code == 0 and (run / "COMPLETE").is_file()
    assert result.err.count("warning:") == 1 and "tracking to MLflow failed after 0 of 1 runs" in result.err


def test_a_store_to_be_created_is_not_created_by_the_check(tmp_path):
    assert tracking.choose("mlflow", None, home=tmp_path / "runs") == tracking.Tracking("mlflow")
    assert not (tmp_path / "runs").exists()
    with pytest.raises(RecxError, match=r"mlflow\.db cannot be created \(.*file is not a writable folder\)"):
        (tmp_path / "file").write_text("")
        tracking.choose("mlflow", f"sqlite:///{tmp_path / 'file' / 'mlflow.db'}")


def test_an_experiment_s_tracking_is_checked_before_its_runs(tmp_path, recx_cli):
    spec = yaml.safe_load(yaml.safe_dump(EXPERIMENT))
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    out.mkdir()
    (out / "mlflow.db").write_text("not a database")
    result = recx_cli("sweep", path, "--experiment", "small", "--out", out, "--data-root", tmp_path / "data")
    assert result.code == 1 and f"{path}: experiments.small: track = mlflow: the MLflow store" in result.err
    assert not (tmp_path / "data").exists() and not (out / "runs").exists()


def test_unknown_tracking_backend_is_a_user_error(recx_cli):
    result = recx_cli("train", "--track", "wandb")
    assert result.code == 1 and "--track 'wandb': expected mlflow" in result.err


def test_sweep_groups_its_runs_in_one_experiment_and_logs_each_once(tmp_path, recx_cli):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    out = tmp_path / "out"
    args = ("sweep", path, "--experiment", "small", "--out", out, "--data-root", tmp_path / "data")
    assert recx_cli(*args).code == 0
    client = _client(out)
    logged = _runs(client, "small")
    assert sorted(run.data.tags["recx.method"] for run in logged) == ["bpr", "ssm"]
    assert all("test/ndcg_at_5" in run.data.metrics for run in logged)
    assert recx_cli(*args).code == 0 and len(_runs(client, "small")) == 2  # skipped runs are not logged again
