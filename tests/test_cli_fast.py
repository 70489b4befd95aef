"""`recx --help`, `--version`, mistakes and shell completion answer without torch, pandas or the registries."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "torch",
    "pandas",
    "recx.samplers",
    "recx.losses",
    "recx.models",
    "recx.data.formats",
    "recx.config.run_config",
)
# What `--help` does not need either: the configuration's schema (the run settings' options are read from the stored
# catalogue), pydantic (the validators Typer builds for the options it parses), numpy, rich, YAML.
NOT_FOR_HELP = HEAVY + ("numpy", "pydantic", "recx.config", "recx.config.schema", "rich", "yaml")
PROBE = """
import json, sys
modules = json.loads(sys.argv[2])
sys.argv = ["recx", *json.loads(sys.argv[1])]
try:
    from recx.__main__ import main
    main()
except SystemExit:
    pass
finally:
    sys.stdout.flush()
    print("\\nIMPORTED " + json.dumps(sorted(m for m in modules if m in sys.modules)), file=sys.stderr)
"""


def _probe(args, env=None, modules=HEAVY):
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args), json.dumps(modules)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=60,
    )
    imported = json.loads(result.stderr.rsplit("IMPORTED ", 1)[1])
    return result.stdout, result.stderr, imported


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["train", "--help"],
        ["sweep", "--help"],
        ["list", "--help"],
        ["diagnose", "sampler", "--help"],
        ["--version"],
        ["trian"],
        ["train", "--bogus"],
        [],
    ],
)
def test_answers_without_heavy_imports(args):
    out, err, imported = _probe(args)
    assert imported == [], f"recx {' '.join(args)} imported {imported}"
    assert out or err


@pytest.mark.parametrize(
    "args",
    [["--help"], ["train", "--help"], ["sweep", "--help"], ["eval", "--help"], ["diagnose", "sampler", "--help"]],
)
def test_help_builds_no_schema(args):
    """--help reads the generated options from the stored catalogue: no torch, no configuration schema, no pydantic
    validators, and importlib.metadata only when an installed package declares a plugin entry point."""
    from recx.core import plugins

    modules = NOT_FOR_HELP + (() if plugins.may_declare_entry_points() else ("importlib.metadata",))
    out, err, imported = _probe(args, modules=modules)
    assert imported == [], f"recx {' '.join(args)} imported {imported}"
    assert out.startswith("Usage: recx"), err


@pytest.mark.parametrize(
    "args",
    [[], ["train"], ["sweep"], ["eval"], ["prepare"], ["report"], ["list"], ["diagnose"], ["diagnose", "sampler"]],
)
def test_help_is_the_one_typer_gives(recx_cli, monkeypatch, args):
    """`recx COMMAND --help`, answered without parsing recx's own options (terminal.command_help), prints what Typer's
    own path prints, byte for byte."""
    from recx.shell import terminal

    fast = recx_cli(*args, "--help")
    monkeypatch.setattr(terminal, "command_help", lambda app, words: False)
    typer_path = recx_cli(*args, "--help")
    assert fast.code == typer_path.code == 0
    assert fast.out == typer_path.out and fast.out.startswith(f"Usage: recx {' '.join(args)}".rstrip())


def test_entry_points_are_looked_for_where_importlib_metadata_looks(tmp_path, monkeypatch):
    """plugins.may_declare_entry_points (read without importing importlib.metadata) says yes whenever
    importlib.metadata finds a `recx.plugins` entry point: one in a .dist-info folder on sys.path is found, one of
    another group is not, and a zip on sys.path is a yes (unsure), as is a finder of distributions it does not know;
    the importlib_metadata backport's finder (imported by MLflow and Ray) reads the same folders and is known."""
    import importlib.machinery
    import importlib.metadata

    from recx.core import plugins

    # the backport, once imported, deletes PathFinder.find_distributions (its finder replaces it): the stand-in
    # finds distributions as the standard library's path finder does
    MetadataPathFinder = type("MetadataPathFinder", (), {"__module__": "importlib_metadata"})
    MetadataPathFinder.find_distributions = staticmethod(importlib.metadata.MetadataPathFinder.find_distributions)
    monkeypatch.setattr(sys, "meta_path", [importlib.machinery.PathFinder, MetadataPathFinder()])
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    info = tmp_path / "someone_else-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: someone-else\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[console_scripts]\nelse = someone_else:main\n")
    assert not plugins.may_declare_entry_points() and not importlib.metadata.entry_points(group=plugins.GROUP)
    (info / "entry_points.txt").write_text("[recx.plugins]\nmine = someone_else.methods\n")
    assert plugins.may_declare_entry_points() and importlib.metadata.entry_points(group=plugins.GROUP)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing"), str(tmp_path / "info.zip")])
    (tmp_path / "info.zip").write_bytes(b"")
    assert plugins.may_declare_entry_points()
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing")])
    assert not plugins.may_declare_entry_points()
    Elsewhere = type("Elsewhere", (), {"find_distributions": staticmethod(lambda context=None: iter(()))})
    monkeypatch.setattr(sys, "meta_path", [importlib.machinery.PathFinder, Elsewhere()])
    assert plugins.may_declare_entry_points()


def test_version_and_verbose_versions(recx_cli):
    from recx import __version__

    assert recx_cli("--version").out.strip() == f"recx {__version__}"
    verbose = recx_cli("--version", "--verbose").out
    assert all(name in verbose for name in ("torch", "CUDA", "CuPy")) and "faiss" not in verbose
    assert "CuPy" in recx_cli("list", "versions").out


def _complete(words: str, env=None) -> list[str]:
    """Bash completion through Typer/Click's entry point, as the installed completion script calls it."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = {"_RECX_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword), **(env or {})}
    out, _, imported = _probe([], env)
    assert imported == [], f"completing {words!r} imported {imported}"
    return out.split()


def test_bash_completion_of_commands_options_and_registered_names(tmp_path):
    from recx.losses.registry import LOSSES
    from recx.samplers.registry import SAMPLERS

    assert _complete("recx tr") == ["train"]
    assert "--sampler" in _complete("recx train --sa")
    assert _complete("recx train --sampler ") == SAMPLERS.names()
    assert _complete("recx train --loss b") == [name for name in LOSSES.names() if name.startswith("b")]
    assert "synthetic" in _complete("recx prepare x --format ")
    assert "versions" in _complete("recx list ")


def test_bash_completion_of_datasets_and_experiments(tmp_path):
    for name in ("ml-small", "gowalla"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "card.json").write_text("{}")
    (tmp_path / "not-a-dataset").mkdir()
    assert _complete(f"recx train --data-root {tmp_path} --dataset ") == ["gowalla", "ml-small"]
    assert _complete("recx train --dataset g", {"RECX_DATA": str(tmp_path)}) == ["gowalla"]
    experiments = tmp_path / "exp.yaml"
    experiments.write_text("experiments:\n  alpha: {}\n  beta: {}\n")
    assert _complete(f"recx sweep {experiments} -e ") == ["alpha", "beta"]
