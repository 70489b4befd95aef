"""What recx knows by name, read from the registries: `recx list`, the `--help` texts and shell completion.

Each entry is a name, the module that defines it, its arguments with their defaults and what they accept (the
`Args` dataclass of a sampler, loss or model, each field's range or choices; the keyword arguments of a format
reader) and its one-line summary (the class's `summary`, else the first sentence of its docstring).

Reading the registries imports torch and every registered module (seconds), so `--help`, `--version` and shell
completion read `catalog.json` beside this file instead: the same entries, the run config's defaults and the run
settings' command-line options (recx.shell.run_options: each one's type, help and range, from recx.config.schema),
written by `python -m recx.shell.catalog --write` (`make catalog`) and checked against the live registries and the
schema by tests/test_cli_catalog.py.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from recx.core.errors import RecxError
from recx.core.folders import write_text_atomic

KINDS = ("samplers", "losses", "models", "metrics", "formats", "experiments")
STORED_KINDS = KINDS[:-1]  # experiments come from the user's experiments file, not from the code
STORED = Path(__file__).with_name("catalog.json")


@dataclass
class Entry:
    name: str
    module: str
    args: str
    summary: str


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = inspect.cleandoc(doc or "").strip().split("\n\n")[0]
    text = " ".join(paragraph.split())
    end = re.search(r"[.:](\s|$)", text)
    return text[: end.start()] if end else text


def _summary(obj) -> str:
    """The object's `summary`, else its own docstring's first sentence (not one inherited), else its module's."""
    declared = getattr(obj, "summary", "") if isinstance(obj, type) else ""
    own = obj.__dict__.get("__doc__") if isinstance(obj, type) else obj.__doc__
    return declared or first_sentence(own) or first_sentence(sys.modules[obj.__module__].__doc__)


def _dataclass_args(args_class) -> str:
    from recx.core.args import describe_field

    return ", ".join(describe_field(spec) for spec in dataclasses.fields(args_class))


def _function_args(function) -> str:
    skip = {"source", "seed", "skip_bad_lines", "report"}
    return ", ".join(
        f"{p.name}={p.default!r}"
        for p in inspect.signature(function).parameters.values()
        if p.default is not inspect.Parameter.empty and p.name not in skip
    )


def _registered(registry, args, summary=_summary) -> list[Entry]:
    return [
        Entry(name, registry.get(name).__module__, args(registry.get(name)), summary(registry.get(name)))
        for name in registry.names()
    ]


def is_builtin(entry: Entry) -> bool:
    return entry.module == "recx" or entry.module.startswith("recx.")


def entries(kind: str, experiments_file: Path | None = None) -> list[Entry]:
    """The entries of one kind (one of KINDS)."""
    if kind == "samplers":
        from recx.samplers.registry import SAMPLERS

        return _registered(SAMPLERS, lambda c: _dataclass_args(c.Args))
    if kind == "losses":
        from recx.losses.registry import LOSSES

        return _registered(LOSSES, lambda c: _dataclass_args(c.Args))
    if kind == "models":
        from recx.models.registry import MODELS

        return _registered(MODELS, lambda c: _dataclass_args(c.Args) + f"; runner {c.runner}")
    if kind == "formats":
        from recx.data.formats.registry import FORMATS

        return _registered(FORMATS, _function_args)
    if kind == "metrics":
        return _metrics()
    if kind == "experiments":
        return _experiments(experiments_file or Path("experiments.yaml"))
    from recx.core.errors import RecxError

    raise RecxError(f"recx list {kind!r}: expected one of {', '.join(KINDS)}")


def _metrics() -> list[Entry]:
    from recx.eval.metrics.registry import METRICS

    def args(metric) -> str:
        return "k (cut-off: name@k)" if metric.cutoff else "beta (recx eval --auc --opauc-beta)"

    def summary(metric) -> str:
        return _summary(metric) + ("; also per popularity stratum" if metric.additive else "")

    return _registered(METRICS, args, summary)


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
            first_sentence(str(spec.get("description") or "")),
        )
        for name, spec in experiments.items()
        if isinstance(spec, dict)
    ]


def _settings(defaults: dict, choices: dict) -> list[dict]:
    """The run settings as the command line offers them (recx.shell.run_options), in RunConfig's field order:
    each one's key, its option's type (bool, int, float; str for a word or a YAML mapping), its declared help, and
    what it accepts: `registered` (the catalogue kind whose names it takes, listed when --help is shown, with the
    plugins' names) or `accepts` (its range, or its choices when its help does not name them all)."""
    from recx.config.run_config import HELP, RANGES, REGISTERED

    settings = []
    for key, help in HELP.items():
        setting = {"key": key, "type": "str" if key.endswith("_args") else type(defaults[key]).__name__, "help": help}
        if key in REGISTERED:
            setting["registered"] = REGISTERED[key]
        elif not all(choice in help for choice in choices.get(key, [])):
            setting["accepts"] = ": " + ", ".join(choices[key])
        if key in RANGES:
            setting["accepts"] = ", " + RANGES[key].describe()
        settings.append(setting)
    return settings


def build() -> dict:
    """The stored catalogue, from the live registries: the built-in entries of every kind but experiments, the run
    config's defaults and the choices of its settings that take one of a few words, and the run settings' options
    (`_settings`: what `recx train --help` shows, so that it reads them here rather than building them)."""
    from recx.config.run_config import CHOICES, RunConfig

    defaults = {key: value for key, value in dataclasses.asdict(RunConfig()).items() if not isinstance(value, dict)}
    choices = {key: list(values) for key, values in CHOICES.items()}
    return {
        "entries": {
            kind: [dataclasses.asdict(entry) for entry in entries(kind) if is_builtin(entry)] for kind in STORED_KINDS
        },
        "defaults": defaults,
        "choices": choices,
        "settings": _settings(defaults, choices),
    }


def _plugin_cache() -> Path | None:
    """Where the catalogue of the plugins that would be loaded now is cached (by their names, versions and files'
    content: recx.core.plugins.fingerprint), or None when there are none."""
    from recx.core import plugins

    key = plugins.fingerprint()
    if key is None:
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "recx" / f"plugins-{key}.json"


def remember_plugins() -> None:
    """Cache the loaded plugins' entries, so that `--help` and completion show their names without torch. Called
    once the registries are loaded (`recx list`, a command that trained or evaluated); never fails a command."""
    from recx.core import plugins

    path = _plugin_cache()
    if path is None or not plugins.loaded() or path.is_file():
        return
    found = {kind: [dataclasses.asdict(e) for e in entries(kind) if not is_builtin(e)] for kind in STORED_KINDS}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(found, sort_keys=True))
    except (OSError, RecxError):
        return


def render(content: dict) -> str:
    return json.dumps(content, indent=1, sort_keys=True) + "\n"


@functools.cache
def stored() -> dict:
    """catalog.json, with the cached entries of the plugins that would be loaded now (when recx has seen them)."""
    content = json.loads(STORED.read_text())
    path = _plugin_cache()
    if path is not None and path.is_file():
        try:
            cached = json.loads(path.read_text())
        except (OSError, ValueError):
            cached = {}
        for kind, found in cached.items():
            if kind in content["entries"] and isinstance(found, list):
                content["entries"][kind] += [entry for entry in found if isinstance(entry, dict) and "name" in entry]
    return content


def stored_names(kind: str) -> list[str]:
    """Names of one stored kind (no registry is imported)."""
    return [entry["name"] for entry in stored()["entries"][kind]]


def stored_default(key: str):
    """The run config's default of `key` (no registry is imported)."""
    return stored()["defaults"][key]


def stored_choices(key: str) -> list[str]:
    """The words a run setting takes (optimizer, device, ...), empty for any other (no registry is imported)."""
    return stored()["choices"].get(key, [])


def stored_settings() -> list[dict]:
    """The run settings' options (`_settings`), in the order --help shows them (no registry, nor the configuration,
    is imported)."""
    return stored()["settings"]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m recx.shell.catalog", description="Write or check recx/shell/catalog.json."
    )
    parser.add_argument("--write", action="store_true", help="rewrite catalog.json from the live registries")
    wanted = render(build())
    if parser.parse_args(argv).write:
        write_text_atomic(STORED, wanted)
        print(f"wrote {STORED}")
        return 0
    if STORED.read_text() != wanted:
        print(f"{STORED} is out of date: run `python -m recx.shell.catalog --write` (make catalog)", file=sys.stderr)
        return 1
    print(f"{STORED} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
