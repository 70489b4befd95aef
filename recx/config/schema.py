"""The run's own settings declared: each one's help (the command line's `--key` options are generated from it,
recx.shell.run_options) and range, checked before any work starts; errors name the source, key, value and range.

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

# Every RunConfig setting a user chooses, in the order `--help` shows them (plugin_code is recorded, not chosen);
# tests/test_cli_options.py checks this list against RunConfig's fields.
HELP: dict[str, str] = {
    "dataset": "Prepared dataset name (a folder under the data root).",
    "model": "Model (`recx list models`).",
    "loss": "Loss (`recx list losses`).",
    "sampler": "Negative sampler (`recx list samplers`).",
    "dim": "Embedding dimension.",
    "epochs": "Maximum number of epochs.",
    "batch_size": "Training interactions per step.",
    "n_negatives": "Negatives per query (or shared per batch).",
    "lr": "Learning rate.",
    "lr_step_epochs": "Multiply the learning rate by lr_step_gamma every N epochs (0: a constant rate).",
    "lr_step_gamma": "The factor of each learning-rate step.",
    "half_steps": "Alternating solvers: an epoch is one half-step, validated after each.",
    "fixed_order": "Every epoch takes the training examples in one order drawn once from the seed (PRISM's loader).",
    "deterministic": (
        "On CUDA, torch's deterministic algorithms, so that the same seed repeats bit for bit as on the CPU "
        "(not yet LightGCN's and the ALS models' sparse products)."
    ),
    "optimizer": "Optimizer; auto: the model's and sampler's pairing.",
    "weight_decay": "Weight decay strength.",
    "weight_decay_mode": "Where weight decay applies: full (every row, every step), batch (the rows a step touches) or none.",
    "seed": "Seed of initialisation, shuffling and sampling.",
    "device": "Where to train.",
    "kernels": "Sampler kernels: auto (CuPy on CUDA when installed), torch or cupy.",
    "patience": "Validations without improvement before stopping.",
    "valid_metric": "Validation metric, name@k: early stopping and the best epoch.",
    "eval_every": "Validate every N epochs.",
    "eval_batch_size": "Users per evaluation batch (results do not depend on it).",
    "model_args": "The model's arguments, a YAML mapping such as '{dropout: 0.5}' (`recx list models`).",
    "loss_args": "The loss's arguments, a YAML mapping such as '{temperature: 0.1}' (`recx list losses`).",
    "sampler_args": "The sampler's arguments, a YAML mapping such as '{variant: log}' (`recx list samplers`).",
}
REGISTERED = {"model": "models", "loss": "losses", "sampler": "samplers"}  # settings that name a registered class

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
