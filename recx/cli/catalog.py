"""What recx knows by name, read from the registries: `recx list`, the `--help` texts and shell completion.

Each entry is a name, the module that defines it, its arguments with their defaults (the `Args` dataclass of a
sampler, loss or model; the keyword arguments of a format reader) and the first line of its docstring.

Reading the registries imports torch and every registered module (seconds), so `--help`, `--version` and shell
completion read `catalog.json` beside this file instead: the same entries and the run config's defaults, written by
`python -m recx.cli.catalog --write` (`make catalog`) and checked against the live registries by tests/test_cli_catalog.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("samplers", "losses", "models", "metrics", "formats", "experiments")
STORED_KINDS = KINDS[:-1]  # experiments come from the user's experiments file, not from the code
STORED = Path(__file__).with_name("catalog.json")


@dataclass
class Entry:
    name: str
    module: str
    args: str
    summary: str


def _first_line(doc: str | None) -> str:
    doc = inspect.cleandoc(doc or "").strip()
    return doc.splitlines()[0] if doc else ""


def _summary(obj) -> str:
    """The object's own docstring (not one inherited from a base class), else its module's."""
    own = obj.__dict__.get("__doc__") if isinstance(obj, type) else obj.__doc__
    return _first_line(own) or _first_line(sys.modules[obj.__module__].__doc__)


def _dataclass_args(args_class) -> str:
    parts = []
    for spec in dataclasses.fields(args_class):
        default = (
            spec.default
            if spec.default is not dataclasses.MISSING
            else (spec.default_factory() if spec.default_factory is not dataclasses.MISSING else "required")
        )
        parts.append(f"{spec.name}={default!r}" if default != "required" else f"{spec.name} (required)")
    return ", ".join(parts)


def _function_args(function) -> str:
    skip = {"source", "seed", "skip_bad_lines", "report"}
    return ", ".join(
        f"{p.name}={p.default!r}"
        for p in inspect.signature(function).parameters.values()
        if p.default is not inspect.Parameter.empty and p.name not in skip
    )


def _registered(registry, args) -> list[Entry]:
    entries = []
    for name in registry.names():
        obj = registry.get(name)
        entries.append(Entry(name, obj.__module__, args(obj), _summary(obj)))
    return entries


def entries(kind: str, experiments_file: Path | None = None) -> list[Entry]:
    """The entries of one kind (one of KINDS)."""
    if kind == "samplers":
        from recx.samplers import SAMPLERS

        return _registered(SAMPLERS, lambda c: _dataclass_args(c.Args))
    if kind == "losses":
        from recx.losses import LOSSES

        return _registered(LOSSES, lambda c: _dataclass_args(c.Args))
    if kind == "models":
        from recx.models import MODELS

        return _registered(MODELS, lambda c: _dataclass_args(c.Args) + f"; training kind {c.training_kind}")
    if kind == "formats":
        from recx.data.formats import FORMATS

        return _registered(FORMATS, _function_args)
    if kind == "metrics":
        return _metrics()
    if kind == "experiments":
        return _experiments(experiments_file or Path("experiments.yaml"))
    from recx.core.errors import RecxError

    raise RecxError(f"recx list {kind!r}: expected one of {', '.join(KINDS)}")


def _metrics() -> list[Entry]:
    from recx.eval import auc, metrics

    parts = [part.strip(" -;") for part in re.split(r";\s+|\n", inspect.getdoc(metrics) or "")]
    described = {name: next((part for part in parts if part.lower().startswith(name)), "") for name in metrics.METRICS}
    found = [
        Entry(
            name,
            metrics.__name__,
            "k (cut-off: @k)",
            described[name] + ("; also per popularity stratum" if name in metrics.STRATIFIED else ""),
        )
        for name in metrics.METRICS
    ]
    found.append(Entry("auc, opauc(beta)", auc.__name__, "beta (recx eval --auc --opauc-beta)", _summary(auc)))
    return found


def _experiments(path: Path) -> list[Entry]:
    from recx.config.run_config import read_yaml_mapping

    content = read_yaml_mapping(path, "experiments file")
    experiments = content.get("experiments") or {}
    return [
        Entry(
            name,
            str(path),
            f"datasets {', '.join(map(str, spec.get('datasets', [])))}; "
            f"methods {', '.join(map(str, spec.get('methods') or {}))}",
            str(spec.get("description") or "").split(". ")[0].strip(),
        )
        for name, spec in experiments.items()
        if isinstance(spec, dict)
    ]


def build() -> dict:
    """The stored catalogue, from the live registries: entries of every kind but experiments, run config defaults."""
    from recx.config.run_config import RunConfig

    defaults = {key: value for key, value in RunConfig().to_dict().items() if not isinstance(value, dict)}
    return {
        "entries": {kind: [dataclasses.asdict(entry) for entry in entries(kind)] for kind in STORED_KINDS},
        "defaults": defaults,
    }


def render(content: dict) -> str:
    return json.dumps(content, indent=1, sort_keys=True) + "\n"


@functools.cache
def stored() -> dict:
    return json.loads(STORED.read_text())


def stored_names(kind: str) -> list[str]:
    """Names of one stored kind (no registry is imported)."""
    return [entry["name"] for entry in stored()["entries"][kind]]


def stored_default(key: str):
    """The run config's default of `key` (no registry is imported)."""
    return stored()["defaults"][key]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m recx.cli.catalog", description="Write or check recx/cli/catalog.json."
    )
    parser.add_argument("--write", action="store_true", help="rewrite catalog.json from the live registries")
    wanted = render(build())
    if parser.parse_args(argv).write:
        STORED.write_text(wanted)
        print(f"wrote {STORED}")
        return 0
    if STORED.read_text() != wanted:
        print(f"{STORED} is out of date: run `python -m recx.cli.catalog --write` (make catalog)", file=sys.stderr)
        return 1
    print(f"{STORED} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
