"""Plugins (issue 36, section 2): a sampler, loss, model, format or metric from outside recx, registered through the
same decorators, works wherever a built-in name does (train, sweep with worker processes, eval, resume, report, the
Python front door), is recorded in each run's environment.json, and fails or clashes with one clear message.

The example plugin (examples/plugin/recx_example: sampler `mixture`, loss `hinge`, metric `map`) is loaded as a
package folder with --plugin; tests that load it in this process restore the registries after (`isolated_plugins`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from recx import api
from tests.conftest import EXAMPLE_PLUGIN

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--quiet", "--device", "cpu"]


def recx(*args, env=None, cwd=ROOT) -> subprocess.CompletedProcess:
    """The real command line in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "recx", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=300,
    )


def test_a_plugin_folder_lists_and_trains_and_is_recorded(tiny_root, tmp_path):
    listed = recx("--plugin", EXAMPLE_PLUGIN, "list", "samplers", "--file", tmp_path / "none.yaml")
    assert listed.returncode == 0, listed.stderr
    assert "mixture" in listed.stdout and "recx_example.mixture" in listed.stdout
    run = tmp_path / "run"
    trained = recx(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST,
        "--loss", "hinge", "--sampler", "mixture", "--set", "sampler_args.weight=0.3", "--plugin", EXAMPLE_PLUGIN,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    recorded = json.loads((run / "environment.json").read_text())["plugins"]
    assert [(p["name"], p["source"], p["module"]) for p in recorded] == [
        (str(EXAMPLE_PLUGIN), "folder", "recx_example")
    ]
    assert len(recorded[0]["sha256"]) == 64
    evaluated = recx("eval", run, "--ks", "5", "--plugin", EXAMPLE_PLUGIN)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "map@5" in evaluated.stdout  # the plugin's metric is evaluated beside the built-in ones


def test_a_plugin_name_is_unknown_without_the_plugin(tiny_root, tmp_path):
    result = recx("train", "--dataset", "tiny", "--data-root", tiny_root, "--sampler", "mixture", *FAST)
    assert result.returncode == 1 and "unknown sampler 'mixture'" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_and_completion_show_a_plugin_once_recx_has_seen_it(tmp_path):
    from tests.test_cli_fast import _probe

    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "RECX_PLUGINS": str(EXAMPLE_PLUGIN)}
    assert recx("list", "samplers", "--file", tmp_path / "none.yaml", env=env).returncode == 0
    out, _, imported = _probe(["train", "--help"], env)
    assert "mixture" in out and "hinge" in out and imported == []
    completed, _, imported = _probe(
        [], {**env, "_RECX_COMPLETE": "complete_bash", "COMP_WORDS": "recx train --sampler mi", "COMP_CWORD": "3"}
    )
    assert "mixture" in completed and "midx" in completed and imported == []


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            "import no_such_module_anywhere\n",
            "failed to import: ModuleNotFoundError: No module named 'no_such_module_anywhere'",
        ),
        ("raise RuntimeError('broken on purpose')\n", "failed to import: RuntimeError: broken on purpose"),
    ],
)
def test_a_plugin_that_fails_to_import_is_one_message(tmp_path, source, expected):
    plugin = tmp_path / "broken.py"
    plugin.write_text(source)
    result = recx("--plugin", plugin, "list", "samplers")
    assert result.returncode == 1 and f"error: plugin {plugin} failed to import" in result.stderr
    assert expected.split(": ", 1)[1] in result.stderr and "Traceback" not in result.stderr


def test_a_missing_plugin_is_named(tmp_path):
    result = recx("--plugin", tmp_path / "nope.py", "list", "samplers")
    assert result.returncode == 1 and f"plugin {tmp_path / 'nope.py'} (requested): no such file" in result.stderr
    result = recx("--plugin", "no_such_plugin_module", "list", "samplers")
    assert result.returncode == 1 and "no module named 'no_such_plugin_module' is installed" in result.stderr


CLASH = """
from dataclasses import dataclass
from recx import Sampler, register_sampler

@dataclass
class Args:
    pass

@register_sampler("{name}")
class Clash(Sampler):
    Args = Args
"""


def test_a_name_that_clashes_is_refused_with_both_owners(tmp_path):
    plugin = tmp_path / "clash.py"
    plugin.write_text(CLASH.format(name="uniform"))
    result = recx("--plugin", plugin, "list", "samplers")
    assert result.returncode == 1
    assert "sampler 'uniform' is registered twice: by recx (recx.samplers.uniform) and by plugin" in result.stderr
    assert "(recx_plugin_clash)" in result.stderr
    other = tmp_path / "again.py"
    other.write_text("from recx_example.mixture import MixtureSampler\n" + CLASH.format(name="mixture"))
    result = recx("--plugin", EXAMPLE_PLUGIN, "--plugin", other, "list", "samplers")
    assert result.returncode == 1
    assert f"sampler 'mixture' is registered twice: by plugin {EXAMPLE_PLUGIN} (recx_example.mixture)" in result.stderr


def test_the_python_front_door_equals_the_command_line(tiny_root, tmp_path, recx_cli, isolated_plugins):
    api.use_plugins(str(EXAMPLE_PLUGIN))
    settings = {"dataset": "tiny", "dim": 8, "epochs": 2, "batch_size": 256, "device": "cpu", "loss": "hinge"}
    settings["sampler"], settings["sampler_args"] = "mixture", {"weight": 0.3}
    run = api.train(settings, data_root=tiny_root, run_dir=tmp_path / "api")
    cli = recx_cli(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "cli", *FAST,
        "--loss", "hinge", "--sampler", "mixture", "--set", "sampler_args.weight=0.3",
    )  # fmt: skip
    assert cli.code == 0, cli.err
    pd.testing.assert_frame_equal(run.results, api.load_run(tmp_path / "cli").results)
    assert run.epochs["loss"].tolist() == api.load_run(tmp_path / "cli").epochs["loss"].tolist()
    assert run.config == api.load_run(tmp_path / "cli").config and run.state == "complete"
    assert set(run.per_user("test").metric) >= {"ndcg", "recall", "map"}


def test_a_plugin_run_resumes_from_its_checkpoint(tiny_root, tmp_path, monkeypatch, isolated_plugins):
    from tests.test_resume import assert_same_run, count_epochs, killed_after_checkpoint

    api.use_plugins(str(EXAMPLE_PLUGIN))
    config = api.run_config({"dataset": "tiny", "dim": 8, "epochs": 4, "patience": 4, "device": "cpu"})
    config = api.run_config(config, {"sampler": "mixture", "loss": "hinge", "n_negatives": 4})
    from recx.data.dataset import load_dataset
    from recx.runs.train_run import train_run

    tiny = load_dataset(tiny_root, "tiny")
    killed_after_checkpoint(config, tiny, tmp_path / "resumed", monkeypatch, 2)
    trained = count_epochs(monkeypatch)
    train_run(config, tiny, tmp_path / "resumed")
    assert trained == [3, 4]
    train_run(config, tiny, tmp_path / "whole")
    assert_same_run(tmp_path / "resumed", tmp_path / "whole")


def test_a_sweep_with_worker_processes_compares_a_plugin_with_built_ins(tiny_root, tmp_path, isolated_plugins):
    experiments = tmp_path / "experiments.yaml"
    experiments.write_text(
        yaml.safe_dump(
            {
                "experiments": {
                    "mine": {
                        "datasets": ["tiny"],
                        "seeds": [0, 1],
                        "ks": [10, 20],
                        "defaults": {"model": "mf", "dim": 8, "epochs": 2, "loss": "bpr", "device": "cpu"},
                        "methods": {
                            "uniform": {"sampler": "uniform"},
                            "popularity": {"sampler": "popularity"},
                            "mixture": {"sampler": "mixture", "sampler_args": {"weight": 0.5}},
                        },
                    }
                }
            }
        )
    )
    api.use_plugins(str(EXAMPLE_PLUGIN))
    results = api.sweep(experiments, "mine", out=tmp_path / "out", data_root=tiny_root, jobs=2)
    assert set(results.method) == {"uniform", "popularity", "mixture"}
    significance = (tmp_path / "out" / "significance.md").read_text()
    assert "mixture" in significance and "popularity" in significance
    assert "MAP" not in (tmp_path / "out" / "table.md").read_text()  # the table's metrics: the in_table ones
    for run in (tmp_path / "out" / "runs").iterdir():
        if run.is_dir():
            names = [p["module"] for p in json.loads((run / "environment.json").read_text())["plugins"]]
            assert names == ["recx_example"]  # the worker processes loaded the plugin too
