"""A plugin's code in its runs' identity (issue 45, section 2): a run naming a plugin's model, loss, sampler or
validation metric records the sha256 of that code in its configuration (plugin_code, part of the run id), so another
version of the code is another run and `recx sweep` never counts a run of other code as done; runs of built-in names
keep their ids. Evaluating a run needs its model only (a missing loss or sampler plugin does not matter); a missing
plugin is named as environment.json records it, in `recx eval` and in `recx report`. A package gives the same code
hash loaded as a folder or installed, so a run resumes across the two; a single file is other code, and the message
says which source the run was trained with."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
import yaml

from recx import api
from tests.conftest import EXAMPLE_PLUGIN
from tests.test_plugins import FAST, ROOT, recx

# Run ids written by recx before plugin code joined the identity (commit 8710956), for built-in names.
BUILT_IN_IDS = {
    "cca16fbcb868": {"dataset": "tiny", "loss": "bpr", "sampler": "uniform", "dim": 16, "epochs": 3, "device": "cpu"},
    "42ebc440a679": {
        "dataset": "tiny",
        "loss": "softmax",
        "sampler": "midx_uni",
        "n_negatives": 20,
        "sampler_args": {"n_codewords": 4},
    },
    "4f337817459f": {"dataset": "gowalla", "model": "wrmf", "valid_metric": "recall@20"},
    "6b1276a363f1": {"dataset": "ml", "model": "multvae", "model_args": {"hidden": 16}, "lr_step_epochs": 5},
}

SAMPLER = '''
from dataclasses import dataclass
import torch
from recx import Negatives, Sampler, register_sampler

@dataclass
class Args:
    pass

@register_sampler("drifting")
class Drifting(Sampler):
    """Uniform draws (version {version})."""
    Args = Args

    def sample(self, batch):
        items = torch.randint(0, self.dataset.n_items, (batch.users.numel(), self.n_negatives), generator=self.generator)
        return Negatives(items, torch.zeros(items.shape), torch.zeros(batch.users.numel()))
'''

MODEL = """
from recx import register_model
from recx.models.mf import MatrixFactorization as MF

@register_model("mymf")
class MyMF(MF):
    summary = "MF under another name (a plugin's model)"
"""


@pytest.mark.parametrize("run_id", sorted(BUILT_IN_IDS))
def test_built_in_runs_keep_their_ids(run_id):
    config = api.run_config(BUILT_IN_IDS[run_id])
    assert config.run_id() == run_id and config.plugin_code == {} and "plugin_code" not in config.to_dict()


def sweep_ids(experiments, plugin, cwd) -> dict[str, str]:
    """run id -> status (todo / done) of a sweep's dry run in a fresh process loading `plugin`."""
    result = recx("--plugin", plugin, "sweep", experiments, "-e", "mine", "--dry-run", "--out", cwd / "out", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return {m.group(2): m.group(1) for m in re.finditer(r"^\s+(todo|done)\s+([0-9a-f]{12})", result.stdout, re.M)}


def test_changing_a_plugin_samplers_code_changes_its_runs_ids(tiny_root, tmp_path):
    plugin = tmp_path / "drifting.py"
    plugin.write_text(SAMPLER.format(version=1))
    experiments = tmp_path / "experiments.yaml"
    defaults = {"dim": 8, "epochs": 1, "batch_size": 256, "device": "cpu", "loss": "bpr"}
    experiments.write_text(
        yaml.safe_dump(
            {
                "experiments": {
                    "mine": {
                        "datasets": ["tiny"],
                        "defaults": defaults,
                        "methods": {"uniform": {"sampler": "uniform"}, "drifting": {"sampler": "drifting"}},
                    }
                },
            }
        )
    )
    assert tiny_root == tmp_path / "data"  # the sweep's default data root (./data)
    before = sweep_ids(experiments, plugin, tmp_path)
    trained = recx("--plugin", plugin, "sweep", experiments, "-e", "mine", "--out", tmp_path / "out", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert set(sweep_ids(experiments, plugin, tmp_path).values()) == {"done"}
    config = yaml.safe_load(next((tmp_path / "out" / "runs").glob("*/config.yaml")).read_text())
    recorded = [
        yaml.safe_load(path.read_text()).get("plugin_code")
        for path in (tmp_path / "out" / "runs").glob("*/config.yaml")
    ]
    assert sorted(map(str, recorded)) == sorted(["None", str({"sampler": api_sha(plugin)})])
    assert config  # both runs wrote their configuration

    plugin.write_text(SAMPLER.format(version=2))  # the algorithm's file changes (here its docstring)
    after = sweep_ids(experiments, plugin, tmp_path)
    uniform = [run_id for run_id in before if run_id in after]
    assert len(uniform) == 1 and after[uniform[0]] == "done"  # the built-in method's run: same id, still done
    changed = set(after) - set(before)
    assert len(changed) == 1 and after[changed.pop()] == "todo"  # the plugin's run: a new id, not counted as done


def api_sha(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_eval_needs_the_model_only_and_names_a_missing_plugin(tiny_root, tmp_path):
    run = tmp_path / "run"
    trained = recx(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST,
        "--loss", "hinge", "--sampler", "mixture", "--plugin", EXAMPLE_PLUGIN,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert set(config["plugin_code"]) == {"loss", "sampler"}
    plugin = json.loads((run / "environment.json").read_text())["plugins"][0]
    assert {"sampler mixture", "loss hinge", "metric map", "metric tail_coverage"} <= set(plugin["names"])
    assert config["plugin_code"]["sampler"] == plugin["sha256"]  # the package folder's code, as recorded
    evaluated = recx("eval", run, "--ks", "5")  # no plugin: its loss and sampler are not needed to evaluate
    assert evaluated.returncode == 0, evaluated.stderr
    assert "ndcg@5" in evaluated.stdout and "coverage@5" in evaluated.stdout

    reported = recx("report", run / "results.parquet", "--out", tmp_path / "report")
    assert reported.returncode == 0, reported.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    for metric in ("map", "tail_coverage"):
        assert (
            f"metric {metric!r} is in the results but not registered now (recorded by plugin {EXAMPLE_PLUGIN}" in text
        )

    model = tmp_path / "mymodel.py"
    model.write_text(MODEL)
    own = tmp_path / "own"
    trained = recx(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", own, *FAST, "--model", "mymf",
        "--plugin", model,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    missing = recx("eval", own, "--ks", "5")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert "model 'mymf' is not registered now" in missing.stderr
    assert f"plugin {model}, source file, module recx_plugin_mymodel, code sha256" in missing.stderr
    model.write_text(MODEL + "\n# edited\n")
    changed = recx("eval", own, "--ks", "5", "--plugin", model)
    assert changed.returncode == 0 and "was trained with code sha256" in changed.stderr


def test_a_run_resumes_across_the_plugin_folder_and_the_installed_package(
    tiny_root, tmp_path, monkeypatch, isolated_plugins
):
    """Trained with --plugin FOLDER and killed after a checkpoint, the run goes on in a process that loads the same
    package as an installed module (RECX_PLUGINS=recx_example on the path), to the uninterrupted run's results; a
    single file holding the same sampler is other code, and the refusal names the source the run was trained with."""
    from recx.data.dataset import load_dataset
    from tests.test_resume import killed_after_checkpoint

    api.use_plugins(str(EXAMPLE_PLUGIN))
    settings = {"dataset": "tiny", "dim": 8, "epochs": 3, "patience": 3, "batch_size": 256, "device": "cpu"}
    config = api.run_config({**settings, "sampler": "mixture", "loss": "hinge", "n_negatives": 4})
    killed_after_checkpoint(config, load_dataset(tiny_root, "tiny"), tmp_path / "resumed", monkeypatch, 1)
    common = ["train", "--dataset", "tiny", "--data-root", tiny_root, "--dim", "8", "--epochs", "3", "--batch-size"]
    common += ["256", "--device", "cpu", "--quiet", "--loss", "hinge", "--sampler", "mixture", "--set", "patience=3"]
    common += ["--set", "n_negatives=4"]
    env = {"PYTHONPATH": f"{ROOT}:{EXAMPLE_PLUGIN.parent}", "RECX_PLUGINS": "recx_example"}
    resumed = recx(*common, "--run-dir", tmp_path / "resumed", env=env)
    assert resumed.returncode == 0, resumed.stderr
    lines = [json.loads(line) for line in (tmp_path / "resumed" / "epochs.jsonl").read_text().splitlines()]
    assert [line["epoch"] for line in lines] == [1, 2, 3]
    assert "epoch 1/3" not in resumed.stdout  # epochs 2 and 3 only: it went on from the checkpoint
    whole = recx(*common, "--run-dir", tmp_path / "whole", "--plugin", EXAMPLE_PLUGIN)
    assert whole.returncode == 0, whole.stderr
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "resumed" / "results.parquet"),
        pd.read_parquet(tmp_path / "whole" / "results.parquet"),
    )
    assert yaml.safe_load((tmp_path / "resumed" / "config.yaml").read_text()) == config.to_dict()

    unfinished = tmp_path / "unfinished"  # a run of the folder's code, trained but not evaluated
    shutil.copytree(tmp_path / "resumed", unfinished)
    (unfinished / "COMPLETE").unlink()
    single = tmp_path / "mixture.py"
    single.write_text((EXAMPLE_PLUGIN / "mixture.py").read_text())
    refused = recx(*common, "--run-dir", unfinished, "--plugin", single, "--plugin", EXAMPLE_PLUGIN / "hinge.py")
    assert refused.returncode == 1, refused.stdout
    assert "holds an unfinished run of these settings trained with other plugin code" in refused.stderr
    assert f"recorded in environment.json: plugin {EXAMPLE_PLUGIN}" in refused.stderr
    assert f"loaded now: sampler 'mixture' (plugin {single}" in refused.stderr
