"""What the command line prints is the message whole: rich reads `[gpu]` as markup, so every message printed through
rich is escaped (issue 37, item 6)."""

import sys

from recx.runs import tracking


def test_an_install_hint_keeps_its_brackets(tiny_root, tmp_path, recx_cli):
    result = recx_cli(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "run", "--kernels", "cupy",
        "--device", "cpu", "--quiet",
    )  # fmt: skip
    assert result.code == 1 and "(the gpu extra for CUDA 12, gpu-cuda13 for CUDA 13)" in result.err, result.err


def test_a_tracking_warning_keeps_its_brackets(capsys):
    tracking.warn("mlflow is not installed (pip install 'recx[track]')")
    assert "pip install 'recx[track]'" in capsys.readouterr().err


def test_tracking_without_mlflow_is_refused_with_the_whole_hint(tiny_root, tmp_path, recx_cli, monkeypatch):
    """Not installed, --track mlflow was a warning and an untracked run; it is refused before any work."""
    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` fails as when it is not installed
    run = tmp_path / "run"
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, "--track", "mlflow")
    assert result.code == 1 and not run.exists(), result.err
    assert "error: --track mlflow: mlflow is not installed (pip install 'recx[track]')" in result.err
