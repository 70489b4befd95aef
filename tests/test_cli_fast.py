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
PROBE = """
import json, sys
sys.argv = ["recx", *json.loads(sys.argv[1])]
try:
    from recx.__main__ import main
    main()
except SystemExit:
    pass
finally:
    sys.stdout.flush()
    print("\\nIMPORTED " + json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
""".replace("{heavy}", repr(HEAVY))


def _probe(args, env=None):
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
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
