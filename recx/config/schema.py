"""The ranges of a run's own settings, checked before any work starts; errors name the source, key, value and range.

A table of `Range`s keyed by RunConfig field name rather than pydantic: RunConfig stays the plain dataclass every
module (and the run id hash) already uses, no dependency is added, and a key without a range (a new string option)
still gets the type check of its default. Method arguments (`model_args`, `loss_args`, `sampler_args`) declare their
ranges and choices on their own fields (recx.core.args) and are checked there; their values are not converted, so
run ids do not change.
"""

from __future__ import annotations

from recx.core.args import Range
from recx.core.errors import RecxError
from recx.core.names import check_name

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
