"""Dataset and run names: anything that is not one plain folder name is refused before the disk is touched."""

import pytest
from safety_helpers import assert_user_error, snapshot

FAST = ["--dim", "8", "--epochs", "1", "--batch-size", "256", "--n-negatives", "5", "--quiet", "--device", "cpu"]
BAD_NAMES = ["..", ".", "", "a/b", "../x", "x/..", "a b", "~"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_prepare_refuses_a_name_that_is_not_one_folder(tmp_path, monkeypatch, recx_cli, name):
    project = tmp_path / "project"
    (project / "data" / "keep").mkdir(parents=True)
    (project / "data" / "keep" / "card.json").write_text("{}")
    (project / ".git").mkdir()
    source = tmp_path / "good.txt"
    source.write_text("1 2\n1 3\n2 3\n")
    monkeypatch.chdir(project)
    monkeypatch.delenv("RECX_DATA", raising=False)
    before = snapshot(tmp_path, strict=True)
    result = recx_cli("prepare", name, "--format", "triplets", "--source", source, "--force")
    assert_user_error(result, f"dataset name {name!r}", "expected letters, digits")
    assert snapshot(tmp_path, strict=True) == before


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../x"])
def test_prepare_refuses_bad_names_with_an_explicit_data_root(tmp_path, recx_cli, name):
    root = tmp_path / "root" / "data"
    root.mkdir(parents=True)
    before = snapshot(tmp_path, strict=True)
    result = recx_cli("prepare", name, "--format", "synthetic", "--data-root", root)
    assert_user_error(result, "dataset name")
    assert snapshot(tmp_path, strict=True) == before


@pytest.mark.parametrize("run_dir", ["..", ".", "runs/a b"])
def test_train_refuses_a_bad_run_folder_name(tiny_root, tmp_path, monkeypatch, recx_cli, run_dir):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path, strict=True)
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run_dir, *FAST)
    assert_user_error(result, "run folder name")
    assert snapshot(tmp_path, strict=True) == before


def test_train_refuses_a_bad_dataset_name(tiny_root, tmp_path, recx_cli):
    before = snapshot(tmp_path, strict=True)
    result = recx_cli("train", "--dataset", "../data", "--data-root", tiny_root, *FAST)
    assert_user_error(result, "dataset name '../data'")
    assert snapshot(tmp_path, strict=True) == before


def test_data_root_or_run_folder_that_is_a_file(tiny_root, tmp_path, recx_cli):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    before = snapshot(tmp_path)
    assert_user_error(
        recx_cli("prepare", "x", "--format", "synthetic", "--data-root", afile), f"data root {afile} is a file"
    )
    assert_user_error(
        recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", afile, *FAST),
        f"{afile} exists and is not a run folder",
    )
    assert_user_error(
        recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", afile / "r", *FAST), "is a file"
    )
    assert snapshot(tmp_path) == before


def test_train_refuses_a_folder_that_is_not_a_run(tiny_root, tmp_path, recx_cli):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("precious")
    before = snapshot(tmp_path)
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", other, *FAST, "--force")
    assert_user_error(result, "is not a run folder")
    assert snapshot(tmp_path) == before


EXPERIMENTS = """
datasets:
  tiny: {{format: synthetic, ratios: 80/10/10, synthetic: {{n_users: 60, n_items: 40, mean_length: 8}}}}
experiments:
  {experiment}:
    datasets: [tiny]
    defaults: {{dim: 8, epochs: 1, device: cpu}}
    methods:
      {method}: {{loss: bpr}}
"""


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "x/.."])
def test_sweep_refuses_an_experiment_name_that_is_not_one_folder(tmp_path, monkeypatch, recx_cli, name):
    """`recx sweep file.yaml -e '../x'` trained into ./x/runs outside results/ (issue 46, item 5)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "e.yaml"
    path.write_text(EXPERIMENTS.format(experiment=f"'{name}'", method="bpr"))
    before = snapshot(tmp_path, strict=True)
    result = recx_cli("sweep", path, "-e", name)
    assert_user_error(result, f"experiment name (--experiment) {name!r}: expected letters, digits")
    assert snapshot(tmp_path, strict=True) == before


@pytest.mark.parametrize("name", ["../m", "a/b", "..", "a b"])
def test_sweep_refuses_a_method_name_that_is_not_one_folder(tmp_path, monkeypatch, recx_cli, name):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "e.yaml"
    path.write_text(EXPERIMENTS.format(experiment="one", method=f"'{name}'"))
    before = snapshot(tmp_path, strict=True)
    result = recx_cli("sweep", path, "-e", "one", "--dry-run")
    assert_user_error(result, f"{path}: experiments.one.methods: method name {name!r}: expected letters, digits")
    assert snapshot(tmp_path, strict=True) == before


def test_sweep_refuses_methods_that_are_not_a_mapping(tmp_path, recx_cli):
    path = tmp_path / "e.yaml"
    path.write_text(EXPERIMENTS.format(experiment="one", method="bpr").replace("      bpr: {loss: bpr}", "      - bpr"))
    assert_user_error(
        recx_cli("sweep", path, "-e", "one", "--dry-run"),
        f"{path}: experiments.one.methods: expected a mapping of method names to their settings",
    )
    path.write_text(EXPERIMENTS.format(experiment="one", method="bpr").replace("{loss: bpr}", "[bpr]"))
    assert_user_error(
        recx_cli("sweep", path, "-e", "one", "--dry-run"),
        f"{path}: experiments.one.methods.bpr: expected a mapping of config keys",
    )


def test_a_one_run_sweep_says_one_run(tmp_path, recx_cli):
    """Counts of one are singular (issue 46: "1 items", "over 1 runs")."""
    path = tmp_path / "e.yaml"
    path.write_text(EXPERIMENTS.format(experiment="one", method="bpr"))
    result = recx_cli("sweep", path, "-e", "one", "--dry-run", "--out", tmp_path / "out")
    assert result.code == 0 and "experiment one: 1 run, 0 already complete" in result.out, result.err
