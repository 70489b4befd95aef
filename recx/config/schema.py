"""A run setting declared once: `setting(default, help, range=..., choices=..., ...)` is the RunConfig field and
everything said about it: its `--help` text (the command line's `--key` options are generated from it,
recx.shell.run_options, through the stored catalogue), its range or its choices, checked before any work starts (errors
name the source, key, value and what was expected), the catalogue kind whose names it takes, and whether config.yaml
and the run id hold it only when set. HELP, RANGES and CHOICES (recx.config.run_config) are read from these fields.

Fields with metadata rather than pydantic: RunConfig stays the plain dataclass every module (and the run id hash)
already uses, no dependency is added, and a setting without a range (a string) still gets the type check of its
default. Method arguments (`model_args`, `loss_args`, `sampler_args`) declare theirs on their own fields with
`recx.core.args.arg` and are checked there; their values are not converted, so run ids do not change.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from recx.core.args import Range
from recx.core.errors import RecxError
from recx.core.names import check_name


def setting(
    default: Any = dataclasses.MISSING,
    help: str | None = None,
    *,
    factory: Callable[[], Any] | None = None,
    range: Range | None = None,
    choices: tuple[str, ...] = (),
    registered: str | None = None,
    only_when_set: bool = False,
) -> Any:
    """A RunConfig field: its default (or `factory` of it); `help`: its --help text (None: recorded, not chosen);
    `range` or `choices`: what it accepts; `registered`: the catalogue kind whose names it takes (`recx list KIND`);
    `only_when_set`: in config.yaml and the run id only when set (a key added after runs were written, whose runs keep
    their ids)."""
    metadata = {
        "help": help,
        "range": range,
        "choices": tuple(choices),
        "registered": registered,
        "only_when_set": only_when_set,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def declared(config_class, what: str) -> dict[str, Any]:
    """{key: its declared `what`} of every field of `config_class` that declares one, in field order."""
    return {field.name: field.metadata[what] for field in dataclasses.fields(config_class) if field.metadata.get(what)}


def coerce(field: dataclasses.Field, value, default, where: str):
    """`value` checked (and typed) for the setting `field` whose default is `default`."""
    key, limits, choices = field.name, field.metadata.get("range"), field.metadata.get("choices")
    if limits is not None:
        checked = limits.coerce(value)
        if checked is None:
            raise RecxError(f"{where}: {key} = {value!r}: expected {limits.describe()}")
        return checked
    if key == "dataset":
        return check_name(value, f"{where}: dataset name")
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise RecxError(f"{where}: {key} = {value!r}: expected a mapping such as {{variant: log}}")
        return value
    if isinstance(default, str):
        if not isinstance(value, str):
            raise RecxError(f"{where}: {key} = {value!r}: expected a string")
        if choices and value not in choices:
            raise RecxError(f"{where}: {key} {value!r}; valid: {', '.join(choices)}")
        return value
    try:
        return type(default)(value)
    except (TypeError, ValueError):
        raise RecxError(f"{where}: {key} = {value!r}: expected {type(default).__name__}") from None


def check_values(raw: dict, defaults, where: str) -> None:
    """Check the keys of one source (a file, the command line) that RunConfig knows; unknown keys are resolve's."""
    known = {field.name: field for field in dataclasses.fields(defaults)}
    for key, value in raw.items():
        if key in known:
            coerce(known[key], value, getattr(defaults, key), where)
