"""Component arguments declared on their fields: a component's `Args` dataclass gives each field its range or choices in
the field's metadata (`arg(...)`), and the range check (`check_args`), `recx list`, `--help` and the catalog read
them there. Nothing else lists a component's arguments.

    @dataclass
    class Args:
        temperature: float = arg(1.0, above=0, help="divides the scores")
        variant: str = arg("count", choices=("count", "log"))
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import MISSING, dataclass
from typing import Any

from recx.core.errors import RecxError


@dataclass(frozen=True)
class Range:
    """An integer or finite real in [low, high] (`low_open`, `high_open`: that bound excluded)."""

    kind: type
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def describe(self) -> str:
        noun = "an integer" if self.kind is int else "a finite number"
        show = (lambda x: f"{int(x):,}") if self.kind is int else (lambda x: f"{x:g}")
        if self.high == math.inf:
            if self.low == -math.inf:
                return noun
            return f"{noun} {'>' if self.low_open else '>='} {show(self.low)}"
        if self.low == -math.inf:
            return f"{noun} {'<' if self.high_open else '<='} {show(self.high)}"
        return (
            f"{noun} in {'(' if self.low_open else '['}{show(self.low)}, {show(self.high)}"
            f"{')' if self.high_open else ']'}"
        )

    def coerce(self, value):
        """The value as `kind`, or None when it is not one (bool, non-integral, non-finite, out of range)."""
        if isinstance(value, bool):
            return None
        if self.kind is int:
            if not isinstance(value, int):
                return None
        else:
            if isinstance(value, str):
                try:
                    value = float(value)
                except ValueError:
                    return None
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                return None
            value = float(value)
        too_low = value <= self.low if self.low_open else value < self.low
        too_high = value >= self.high if self.high_open else value > self.high
        return None if too_low or too_high else value


def arg(
    default: Any,
    *,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
    choices: tuple[str, ...] | None = None,
    help: str = "",
    added: bool = False,
) -> Any:
    """A dataclass field with its default and what it accepts: a numeric range (the bounds given; the kind is the
    default's, int or float) or a tuple of string `choices`, and a one-line `help`. `added`: an argument that came
    after runs were recorded; a configuration holds it (and it joins the run id) only when set to another value than
    its default, so that every earlier run keeps its id and its folder its configuration."""
    bounded = any(bound is not None for bound in (at_least, above, at_most, below))
    if bounded and (isinstance(default, bool) or not isinstance(default, (int, float))):
        raise TypeError(f"arg({default!r}): a range needs an int or float default")
    if choices is not None and default not in choices:
        raise TypeError(f"arg({default!r}): the default is not one of the choices {choices}")
    limits = None
    if bounded:
        low = above if above is not None else at_least
        high = below if below is not None else at_most
        limits = Range(
            int if isinstance(default, int) else float,
            low=-math.inf if low is None else low,
            high=math.inf if high is None else high,
            low_open=above is not None,
            high_open=below is not None,
        )
    return dataclasses.field(
        default=default, metadata={"range": limits, "choices": choices, "help": help, "added": added}
    )


def recorded(args_class, values: dict) -> dict:
    """The arguments a configuration records: all but the `added` ones left at their defaults."""
    fields = {spec.name: spec for spec in dataclasses.fields(args_class)}
    return {
        name: value
        for name, value in values.items()
        if not (fields[name].metadata.get("added") and value == field_default(fields[name]))
    }


def field_range(spec: dataclasses.Field) -> Range | None:
    return spec.metadata.get("range")


def field_choices(spec: dataclasses.Field) -> tuple[str, ...] | None:
    return spec.metadata.get("choices")


def field_help(spec: dataclasses.Field) -> str:
    return spec.metadata.get("help", "")


def field_default(spec: dataclasses.Field) -> Any:
    if spec.default is not MISSING:
        return spec.default
    if spec.default_factory is not MISSING:
        return spec.default_factory()
    return MISSING


def describe_field(spec: dataclasses.Field) -> str:
    """`name=default` with what it accepts, e.g. `temperature=1.0 (> 0)`, `variant='count' (count|log)`."""
    default = field_default(spec)
    shown = f"{spec.name} (required)" if default is MISSING else f"{spec.name}={default!r}"
    limits, choices = field_range(spec), field_choices(spec)
    if choices:
        shown += f" ({'|'.join(choices)})"
    elif limits is not None:
        shown += f" ({limits.describe().removeprefix('an integer ').removeprefix('a finite number ')})"
    return shown


def _type_ok(value, default) -> bool:
    if default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if isinstance(default, str):
        return isinstance(value, str)
    return True


def check_args(args_class, given: dict, where: str) -> None:
    """Each given argument has the type of its default (bool, int, finite number, string), lies in its field's range
    or choices, and one set to other than its default that only means something beside another value (the class's
    `applies_with`: {key: (other key, value)}) comes with it. Errors name `where.key`, the value and what was
    expected."""
    for spec in dataclasses.fields(args_class):
        if spec.name not in given:
            continue
        value, default = given[spec.name], field_default(spec)
        if default is not MISSING and not _type_ok(value, default):
            raise RecxError(
                f"{where}.{spec.name} = {value!r}: expected {type(default).__name__} like the default {default!r}"
            )
        limits, choices = field_range(spec), field_choices(spec)
        if limits is not None and limits.coerce(value) is None:
            raise RecxError(f"{where}.{spec.name} = {value!r}: expected {limits.describe()}")
        if choices is not None and value not in choices:
            raise RecxError(f"{where}.{spec.name} = {value!r}: expected one of {', '.join(choices)}")
    defaults = {spec.name: field_default(spec) for spec in dataclasses.fields(args_class)}
    for key, (other, needed) in getattr(args_class, "applies_with", {}).items():
        actual = given.get(other, defaults.get(other))
        if key in given and given[key] != defaults.get(key) and actual != needed:  # a resolved config keeps defaults
            raise RecxError(
                f"{where}.{key} = {given[key]!r} applies only with {other}: {needed} (here {other}: "
                f"{actual}); set {other}: {needed} as well, or leave {key} out"
            )


CONFIG_TYPES = (bool, int, float, str, type(None))  # what a configuration file holds for one argument


def args_problem(obj) -> str | None:
    """What is wrong with a component's `Args` for recx to fill and check it from a configuration, or None: it
    must be a dataclass whose every field has a default of a type a configuration holds (a number, a boolean, a
    string or null), and `Args()` must build."""
    args_class = getattr(obj, "Args", None)
    if args_class is None:
        return (
            "it has no Args: declare a dataclass of its arguments as the class attribute Args (an empty "
            "`@dataclass class Args: pass` when it takes none)"
        )
    if not (isinstance(args_class, type) and dataclasses.is_dataclass(args_class)):
        return f"its Args ({args_class!r}) is not a dataclass: decorate the class of its arguments with @dataclass"
    for spec in dataclasses.fields(args_class):
        default = field_default(spec)
        if default is MISSING:
            return (
                f"its Args field {spec.name!r} has no default: every argument needs one (a configuration may leave "
                "any out), e.g. arg(1.0, above=0)"
            )
        if not isinstance(default, CONFIG_TYPES):
            return (
                f"its Args field {spec.name!r} defaults to a {type(default).__name__} ({default!r}): an argument is "
                "a number, a boolean, a string or null, as a configuration file holds it"
            )
    try:
        args_class()
    except Exception as exc:  # an Args' own checks (__post_init__) refuse its defaults
        return f"its Args() with the defaults raises {type(exc).__name__}: {exc}"
    return None


def class_problem(obj, base: type, methods: tuple[str, ...], with_args: bool = True) -> str | None:
    """What is wrong with a class registered as a component of kind `base`, or None: a subclass of `base` that
    implements `methods`, with a well-formed `Args` (`args_problem`) when `with_args`."""
    if not (isinstance(obj, type) and issubclass(obj, base)):
        return f"it is not a subclass of recx's {base.__name__} ({obj!r})"
    missing = [name for name in methods if getattr(obj, name, None) is getattr(base, name, None)]
    if missing:
        return f"it does not implement {', '.join(missing)} (the {base.__name__} contract)"
    return args_problem(obj) if with_args else None
