"""The Python front door (issue 36, section 5): `import recx` is cheap, its functions give what the command line
gives (the CLI is a shell over them), and a user error is a RecxError with the CLI's one-line message."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

import recx
from recx import RecxError

FAST = {"dim": 8, "epochs": 2, "batch_size": 256, "n_negatives": 20, "device": "cpu"}
FAST_CLI = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "20", "--quiet", "--device", "cpu"]


def test_importing_recx_loads_nothing_heavy():
    probe = "import sys, recx; print(sorted(m for m in ('torch', 'pandas', 'recx.api') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"


def test_train_evaluate_and_load_run_equal_the_command_line(tiny_root, tmp_path, recx_cli):
    run = recx.train({"dataset": "tiny", "loss": "bpr"}, data_root=tiny_root, run_dir=tmp_path / "api", **FAST)
    cli = recx_cli(
        "train",
        "--dataset",
        "tiny",
        "--loss",
        "bpr",
        "--data-root",
        tiny_root,
        "--run-dir",
        tmp_path / "cli",
        *FAST_CLI,
    )
    assert cli.code == 0, cli.err
    same = recx.load_run(tmp_path / "cli")
    pd.testing.assert_frame_equal(run.results, same.results)
    assert run.config == same.config and run.best_epoch == same.best_epoch and len(run.epochs) == 2
    evaluated = recx.evaluate(run, "valid", [5])
    assert set(evaluated.results.split) == {"valid"} and set(evaluated.results.k) == {5}
    assert recx_cli("eval", tmp_path / "cli", "--split", "valid", "--ks", "5").code == 0
    pd.testing.assert_frame_equal(evaluated.results, pd.read_parquet(tmp_path / "cli" / "eval_valid.parquet"))


def test_sweep_returns_the_results_and_report_writes_the_report(tiny_root, tmp_path):
    experiments = tmp_path / "e.yaml"
    experiments.write_text(
        "experiments:\n  two:\n    datasets: [tiny]\n    seeds: [0]\n    ks: [10, 20]\n"
        "    defaults: {dim: 8, epochs: 1, device: cpu}\n"
        "    methods:\n      bpr: {loss: bpr}\n      bce: {loss: bce, n_negatives: 4}\n"
    )
    results = recx.sweep(experiments, "two", out=tmp_path / "out", data_root=tiny_root)
    assert set(results.method) == {"bpr", "bce"} and (tmp_path / "out" / "report.md").is_file()
    written = recx.report(tmp_path / "out" / "results.parquet", tmp_path / "again", baseline="bce")
    assert written == tmp_path / "again" / "report.md" and "against bce" in written.read_text()
    assert recx.sweep(experiments, "two", out=tmp_path / "out", data_root=tiny_root, dry_run=True) is None


def test_an_error_is_the_command_lines_message(tiny_root, tmp_path, recx_cli):
    with pytest.raises(RecxError) as raised:
        recx.train({"dataset": "tiny", "lr": -1.0}, data_root=tiny_root)
    cli = recx_cli("train", "--dataset", "tiny", "--lr", "-1", "--data-root", tiny_root)
    assert cli.code == 1 and f"error: {raised.value}".replace("arguments", "command line") in " ".join(cli.err.split())
    with pytest.raises(RecxError, match="not a run folder recx wrote"):
        recx.load_run(tmp_path)
    with pytest.raises(RecxError, match="unknown sampler 'unifrom' \\(did you mean 'uniform'\\?\\)"):
        recx.run_config({"sampler": "unifrom"})


def test_prepare_gives_the_dataset_folder(tmp_path):
    folder = recx.prepare(
        "s", format="synthetic", ratios="80/20", synthetic={"n_users": 50, "n_items": 30}, data_root=tmp_path
    )
    assert folder == tmp_path / "s" and (folder / "card.json").is_file()
