"""One home per method (issue 36, section 1): nothing under recx/config names a sampler, loss or model (their
defaults, ranges, bundles and pairings are declared by their own classes), and each registry finds its members
without an import list."""

from __future__ import annotations

import ast
from pathlib import Path

from recx.eval.metrics.registry import METRICS
from recx.losses.registry import LOSSES
from recx.models.registry import MODELS
from recx.samplers.registry import SAMPLERS

ROOT = Path(__file__).resolve().parents[1] / "recx"


def string_constants(path: Path) -> set[str]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_no_file_under_config_names_a_sampler_loss_model_or_metric():
    from recx.config.run_config import WEIGHT_DECAY_MODES

    names = set(SAMPLERS.builtins()) | set(LOSSES.builtins()) | set(MODELS.builtins()) | set(METRICS.builtins())
    names -= set(WEIGHT_DECAY_MODES)  # "full" is also a weight-decay mode (every row, every step)
    for path in sorted((ROOT / "config").glob("*.py")):
        named = string_constants(path) & names
        assert not named, f"{path} names {sorted(named)}: declare it on the method's class instead"


def test_registries_find_their_members_without_an_import_list():
    for package in ("samplers", "losses", "models", "data/formats", "eval/metrics", "training/runners"):
        init = (ROOT / package / "__init__.py").read_text()
        assert "import" not in init, f"recx/{package}/__init__.py imports: its registry finds the members itself"
