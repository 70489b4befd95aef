"""The run settings as command-line options, generated from the configuration's declarations: `--key` for every
setting of recx.config.schema.HELP (flag = config key, '_' written '-'), with its help, range or choices and default
from the schema and the stored catalogue (no registry is imported), and `--set KEY=VALUE` for nested keys.

A command decorated with `with_settings(...)` receives them as one mapping, `settings`: the keys the user gave, flags
and --set together (--set is applied last: it wins); the one merge with a config file or an experiment is the
front door's (recx.api).
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable, Optional

import typer
import yaml

from recx.config.schema import HELP, RANGES, REGISTERED
from recx.core import yaml_values
from recx.core.errors import RecxError
from recx.shell import catalog, completion

SET_HELP = (
    "Any config key, KEY=VALUE; nested: sampler_args.variant=log (`recx list samplers` shows each one's arguments)."
)


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _kind(key: str) -> type:
    """bool, int, float or str (a mapping is given as YAML text) from the setting's stored default."""
    if key.endswith("_args"):
        return str
    return type(catalog.stored_default(key))


def _help(key: str, forced: bool) -> str:
    accepted = ""
    if key in REGISTERED:
        accepted = ": " + ", ".join(catalog.stored_names(REGISTERED[key]))
    elif not all(choice in HELP[key] for choice in catalog.stored_choices(key)):
        accepted = ": " + ", ".join(catalog.stored_choices(key))
    if key in RANGES:
        accepted = ", " + RANGES[key].describe()
    if forced:
        return f"{HELP[key].rstrip('.')}{accepted}; forced in every run (default: the experiment's)."
    default = "" if key.endswith("_args") else f" (default: {catalog.stored_default(key)})"
    return f"{HELP[key].rstrip('.')}{accepted}.{default}"


def _completion(key: str):
    if key in REGISTERED:
        return completion.registered(REGISTERED[key])
    if key == "dataset":
        return completion.datasets
    if catalog.stored_choices(key):
        return completion.choices(*catalog.stored_choices(key))
    return None


def _option(key: str, forced: bool) -> inspect.Parameter:
    kind = _kind(key)
    decls = [flag(key)] if kind is not bool else [f"{flag(key)}/--no-{flag(key)[2:]}"]
    info = typer.Option(None, *decls, help=_help(key, forced), autocompletion=_completion(key), show_default=False)
    return inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=Optional[kind])


def _set_option(help: str) -> inspect.Parameter:
    info = typer.Option([], "--set", help=help)
    return inspect.Parameter("set_", inspect.Parameter.KEYWORD_ONLY, default=info, annotation=list[str])


def assignments(pairs: list[str], onto: dict | None = None) -> dict:
    """`--set key=value` (value parsed as YAML), dotted keys for nested args: sampler_args.variant=log; each one set
    in a copy of `onto` (the options given as flags: --set wins)."""
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
        keys = [key for key in HELP if key not in skip]

        @functools.wraps(command)
        def run(*args, **values):
            return command(*args, settings=_given(keys, values), **values)

        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(command, eval_str=True).parameters.values()
            if p.name != "settings"
        ]
        added = [_option(key, forced) for key in keys] + [_set_option(set_help)]
        ordered = own + added if forced else added + own
        run.__signature__ = inspect.Signature(ordered)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in ordered}
        return run

    return decorate
