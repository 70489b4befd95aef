"""The run settings as command-line options, generated from the configuration's declarations: `--key` for every
setting RunConfig declares with a help (recx.config.schema.setting; flag = config key, '_' written '-'), with its
help, range or choices and default, and `--set KEY=VALUE` for nested keys. They are read from the stored catalogue
(recx.shell.catalog: `make catalog` writes them from RunConfig's fields, tests/test_cli_catalog.py checks them), so
that `--help` imports neither the configuration nor any registry.

A command decorated with `with_settings(...)` receives them as one mapping, `settings`: the keys the user gave, flags
and --set together (--set is applied last: it wins); the one merge with a config file or an experiment is the
front door's (recx.api).
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable, Optional

import typer

from recx.core.errors import RecxError
from recx.shell import catalog, completion

SET_HELP = (
    "Any config key, KEY=VALUE; nested: sampler_args.variant=log (`recx list samplers` shows each one's arguments)."
)
TYPES = {"bool": bool, "int": int, "float": float, "str": str}


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _settings() -> dict[str, dict]:
    """The stored run settings by key, in --help's order."""
    return {setting["key"]: setting for setting in catalog.stored_settings()}


def _kind(setting: dict) -> type:
    """bool, int, float or str (a mapping is given as YAML text)."""
    return TYPES[setting["type"]]


def _help(setting: dict, forced: bool) -> str:
    key, declared = setting["key"], setting["help"].rstrip(".")
    accepted = setting.get("accepts", "")
    if not accepted and "registered" in setting:
        accepted = ": " + ", ".join(catalog.stored_names(setting["registered"]))
    if forced:
        return f"{declared}{accepted}; forced in every run (default: the experiment's)."
    default = "" if key.endswith("_args") else f" (default: {catalog.stored_default(key)})"
    return f"{declared}{accepted}.{default}"


def _completion(setting: dict):
    key = setting["key"]
    if "registered" in setting:
        return completion.registered(setting["registered"])
    if key == "dataset":
        return completion.datasets
    if catalog.stored_choices(key):
        return completion.choices(*catalog.stored_choices(key))
    return None


def _option(setting: dict, forced: bool) -> inspect.Parameter:
    kind, name = _kind(setting), flag(setting["key"])
    decls = [name] if kind is not bool else [f"{name}/--no-{name[2:]}"]
    info = typer.Option(
        None, *decls, help=_help(setting, forced), autocompletion=_completion(setting), show_default=False
    )
    return inspect.Parameter(setting["key"], inspect.Parameter.KEYWORD_ONLY, default=info, annotation=Optional[kind])


def _set_option(help: str) -> inspect.Parameter:
    info = typer.Option([], "--set", help=help)
    return inspect.Parameter("set_", inspect.Parameter.KEYWORD_ONLY, default=info, annotation=list[str])


def assignments(pairs: list[str], onto: dict | None = None) -> dict:
    """`--set key=value` (value parsed as YAML), dotted keys for nested args: sampler_args.variant=log; each one set
    in a copy of `onto` (the options given as flags: --set wins)."""
    import yaml

    from recx.core import yaml_values

    out: dict = {key: dict(value) if isinstance(value, dict) else value for key, value in (onto or {}).items()}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RecxError(f"--set {pair!r}: expected KEY=VALUE, e.g. sampler_args.variant=log")
        target = out
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise RecxError(f"--set {pair!r}: {parent} is set to a value, not a mapping, by another --set")
        try:
            target[leaf] = yaml_values.load(value)
        except yaml.YAMLError:
            raise RecxError(f"--set {pair!r}: the value is not valid YAML") from None
    return out


def _mapping(key: str, text: str) -> dict:
    import yaml

    from recx.core import yaml_values

    try:
        value = yaml_values.load(text)
    except yaml.YAMLError:
        value = None
    if not isinstance(value, dict):
        raise RecxError(f"{flag(key)} {text!r}: expected a YAML mapping such as '{{variant: log}}'")
    return value


def _given(keys: list[str], values: dict) -> dict:
    """The settings the user gave: flags, then --set over them."""
    flags = {key: values.pop(key) for key in keys}
    given = {
        key: _mapping(key, value) if key.endswith("_args") else value
        for key, value in flags.items()
        if value is not None
    }
    return assignments(values.pop("set_"), onto=given)


def with_settings(*, skip: tuple[str, ...] = (), forced: bool = False, set_help: str = SET_HELP) -> Callable:
    """Decorate a command that takes `settings` (keyword-only): one option per run setting (but `skip`) and --set
    replace it, before the command's own options in --help (`recx train`), or after them when `forced`: settings that
    win over an experiment's (`recx sweep`, whose own options say which experiment)."""

    def decorate(command: Callable) -> Callable:
        settings = _settings()
        keys = [key for key in settings if key not in skip]

        @functools.wraps(command)
        def run(*args, **values):
            return command(*args, settings=_given(keys, values), **values)

        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(command, eval_str=True).parameters.values()
            if p.name != "settings"
        ]
        added = [_option(settings[key], forced) for key in keys] + [_set_option(set_help)]
        ordered = own + added if forced else added + own
        run.__signature__ = inspect.Signature(ordered)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in ordered}
        return run

    return decorate
