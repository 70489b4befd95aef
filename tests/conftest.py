"""Shared fixtures: tiny synthetic datasets and a CLI runner that behaves like the `recx` command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _few_threads():
    torch.set_num_threads(1)


@pytest.fixture
def tiny_root(tmp_path) -> Path:
    """A 200-user, 100-item synthetic dataset with train/valid/test, prepared under tmp_path/data."""
    root = tmp_path / "data"
    prepare(
        "tiny",
        PrepareOptions(
            format="synthetic", ratios="80/10/10", synthetic={"n_users": 200, "n_items": 100, "mean_length": 12}
        ),
        root,
    )
    return root


@pytest.fixture
def tiny(tiny_root):
    return load_dataset(tiny_root, "tiny")


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def recx_cli(capsys, monkeypatch):
    """Run `recx ARGS...` in-process through the real entry point; returns exit code and captured output."""
    from recx.cli import main

    def run(*args: str) -> CliResult:
        monkeypatch.setattr(sys, "argv", ["recx", *map(str, args)])
        try:
            main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


EXAMPLE_PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "plugin" / "recx_example"


@pytest.fixture
def train_tiny(tiny_root, recx_cli):
    """`recx train --dataset tiny` (tiny_root's dataset) into the run folder `run`, with `options`: its CliResult."""

    def train(run, *options):
        return recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *options)

    return train


@pytest.fixture
def isolated_plugins(monkeypatch):
    """Plugins loaded in a test leave no trace in the next: the registries' names, the loader's state and the
    plugins' modules are restored afterwards."""
    from recx.core import plugins
    from recx.data.formats.registry import FORMATS
    from recx.eval.metrics.registry import METRICS
    from recx.losses.registry import LOSSES
    from recx.models.registry import MODELS
    from recx.samplers.registry import SAMPLERS

    for registry in (SAMPLERS, LOSSES, MODELS, FORMATS, METRICS):
        registry.names()  # built-ins found before the copies are taken
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_owners", dict(registry._owners))
    for name, empty in (("_requested", []), ("_loaded", []), ("_started", False), ("_registered", {}), ("_hashes", {})):
        monkeypatch.setattr(plugins, name, empty)
    monkeypatch.delenv(plugins.ENV, raising=False)
    before = set(sys.modules)
    yield plugins
    for name in set(sys.modules) - before:
        if name.startswith(("recx_example", "recx_plugin_")):
            del sys.modules[name]
