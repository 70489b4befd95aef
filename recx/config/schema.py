"""The ranges of a run's settings, checked before any work starts; errors name the source, key, value and range.

A table of `Range`s keyed by RunConfig field name rather than pydantic: RunConfig stays the plain dataclass every
module (and the run id hash) already uses, no dependency is added, and a key without a range (a new string option)
still gets the type check of its default. Method arguments (`model_args`, `loss_args`, `sampler_args`) are checked
against the types of their dataclass defaults; their values are not converted, so run ids do not change.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields

from recx.core.errors import RecxError
from recx.core.names import check_name

ARGS_KEYS = ("model_args", "loss_args", "sampler_args")


@dataclass(frozen=True)
class Range:
    """An integer or finite real in [low, high] (`low_open`, `high_open`: that bound excluded)."""

    kind: type
    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def describe(self) -> str:
        noun = "an integer" if self.kind is int else "a finite number"
        show = (lambda x: f"{int(x):,}") if self.kind is int else (lambda x: f"{x:g}")
        if self.high == math.inf:
            return f"{noun} {'>' if self.low_open else '>='} {show(self.low)}"
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


RANGES: dict[str, Range] = {
    "dim": Range(int, 1, 65_536),
    "epochs": Range(int, 1, 100_000),
    "batch_size": Range(int, 1, 100_000_000),
    "n_negatives": Range(int, 1, 10_000_000),
    "lr": Range(float, 0, low_open=True),
    "lr_step_epochs": Range(int, 0, 100_000),
    "lr_step_gamma": Range(float, 0, 1, low_open=True),
    "weight_decay": Range(float, 0),
    "seed": Range(int, 0, 2**63 - 1),
    "patience": Range(int, 1, 100_000),
    "eval_every": Range(int, 1, 100_000),
    "eval_batch_size": Range(int, 1, 10_000_000),
}


# Method arguments (model_args, loss_args, sampler_args) by name: the same name means the same kind of value in
# every method that has it (a temperature divides scores, a weight is a share, a count counts).
ARG_RANGES: dict[str, Range] = {
    "temperature": Range(float, 0, low_open=True),
    "rho": Range(float, 0, low_open=True),
    "init_std": Range(float, 0, low_open=True),
    "init_scale": Range(float, 0, low_open=True),
    "lr_step_factor": Range(float, 0, low_open=True),
    "alpha": Range(float, 0),
    "beta": Range(float, 0, 1),
    "gamma": Range(float, 0),
    "gamma_user": Range(float, 0),
    "gamma_item": Range(float, 0),
    "smoothing": Range(float, 0),
    "regularization": Range(float, 0),
    "anneal_cap": Range(float, 0),
    "cache_weight": Range(float, 0, 1),
    "dropout": Range(float, 0, 1, high_open=True),
    "m": Range(int, 1, 10_000_000),
    "n_candidates": Range(int, 1, 10_000_000),
    "n_negatives": Range(int, 1, 10_000_000),
    "n_codewords": Range(int, 1, 1_000_000),
    "leaf_size": Range(int, 1, 10_000_000),
    "hidden": Range(int, 1, 1_000_000),
    "cg_steps": Range(int, 1, 1_000),
    "anneal_steps": Range(int, 1),
    "n_resampled": Range(int, 0, 10_000_000),
    "cache_size": Range(int, 0, 10_000_000),
    "max_redraws": Range(int, 0, 1_000),
    "kmeans_iterations": Range(int, 0, 100_000),
    "n_layers": Range(int, 0, 100),
    "lr_step_epochs": Range(int, 0, 100_000),
}


def coerce(key: str, value, default, where: str):
    """`value` checked (and typed) for config key `key` whose default is `default`."""
    if key in RANGES:
        checked = RANGES[key].coerce(value)
        if checked is None:
            raise RecxError(f"{where}: {key} = {value!r}: expected {RANGES[key].describe()}")
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
        return value
    try:
        return type(default)(value)
    except (TypeError, ValueError):
        raise RecxError(f"{where}: {key} = {value!r}: expected {type(default).__name__}") from None


def check_values(raw: dict, defaults, where: str) -> None:
    """Check the keys of one source (a file, the command line) that RunConfig knows; unknown keys are resolve's."""
    for key, value in raw.items():
        if hasattr(defaults, key):
            coerce(key, value, getattr(defaults, key), where)


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
    """Each given method argument has the type of its default (bool, int, finite number, string) and lies in its
    range (ARG_RANGES, by name), and one set to
    other than its default that only means something beside another value (the class's `applies_with`:
    {key: (other key, value)}) comes with it."""
    for spec in fields(args_class):
        if spec.name in given and spec.default is not MISSING and not _type_ok(given[spec.name], spec.default):
            raise RecxError(
                f"{where}.{spec.name} = {given[spec.name]!r}: expected "
                f"{type(spec.default).__name__} like the default {spec.default!r}"
            )
        limits = ARG_RANGES.get(spec.name)
        if spec.name in given and limits is not None and limits.coerce(given[spec.name]) is None:
            raise RecxError(f"{where}.{spec.name} = {given[spec.name]!r}: expected {limits.describe()}")
    defaults = {spec.name: spec.default for spec in fields(args_class)}
    for key, (other, needed) in getattr(args_class, "applies_with", {}).items():
        actual = given.get(other, defaults.get(other))
        if key in given and given[key] != defaults.get(key) and actual != needed:  # a resolved config keeps defaults
            raise RecxError(
                f"{where}.{key} = {given[key]!r} applies only with {other}: {needed} (here {other}: "
                f"{actual}); set {other}: {needed} as well, or leave {key} out"
            )
