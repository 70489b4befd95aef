"""recx: an experiment runner for negative sampling, softmax approximation and losses in implicit-feedback
recommendation.

The front door (recx.api; importing recx loads nothing heavy until one of these is used):
    prepare, train, evaluate, evaluate_lists, diagnose_samplers, sweep, report, load_run, run_config, use_plugins, Run,
    RecxError
Your own components (samplers, losses, models, metrics, formats), registered as the built-ins are (a plugin module calls these when it is imported):
    register_sampler, register_loss, register_model, register_format, register_metric
    Sampler, Negatives, Batch, Loss, LossInput, Bundle, Model, Metric, TopK, Exposure, Catalogue, arg
A component's contract, for its tests: recx.testing (check_sampler, check_loss, check_model, check_metric).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from recx.core.versions import RECX_VERSION as __version__

if TYPE_CHECKING:  # the types of the lazily loaded names, for type checkers and editors
    from recx.api import (
        Run,
        diagnose_samplers,
        evaluate,
        evaluate_lists,
        load_run,
        prepare,
        report,
        run_config,
        sweep,
        train,
        use_plugins,
    )
    from recx.core.args import arg
    from recx.core.errors import RecxError
    from recx.eval.catalogue import Catalogue, Exposure
    from recx.eval.metrics.registry import Metric, TopK
    from recx.losses.base import Bundle, Loss, LossInput
    from recx.models.base import Model
    from recx.samplers.base import Batch, Negatives, Sampler

_EXPORTS = {
    "prepare": "recx.api",
    "train": "recx.api",
    "evaluate": "recx.api",
    "diagnose_samplers": "recx.api",
    "evaluate_lists": "recx.api",
    "sweep": "recx.api",
    "report": "recx.api",
    "load_run": "recx.api",
    "run_config": "recx.api",
    "use_plugins": "recx.api",
    "Run": "recx.api",
    "RecxError": "recx.core.errors",
    "arg": "recx.core.args",
    "Sampler": "recx.samplers.base",
    "Negatives": "recx.samplers.base",
    "Batch": "recx.samplers.base",
    "Loss": "recx.losses.base",
    "LossInput": "recx.losses.base",
    "Bundle": "recx.losses.base",
    "Model": "recx.models.base",
    "Metric": "recx.eval.metrics.registry",
    "TopK": "recx.eval.metrics.registry",
    "Exposure": "recx.eval.catalogue",
    "Catalogue": "recx.eval.catalogue",
}
_REGISTRIES = {
    "register_sampler": ("recx.samplers.registry", "SAMPLERS"),
    "register_loss": ("recx.losses.registry", "LOSSES"),
    "register_model": ("recx.models.registry", "MODELS"),
    "register_format": ("recx.data.formats.registry", "FORMATS"),
    "register_metric": ("recx.eval.metrics.registry", "METRICS"),
}
__all__ = [
    "prepare",
    "train",
    "evaluate",
    "diagnose_samplers",
    "evaluate_lists",
    "sweep",
    "report",
    "load_run",
    "run_config",
    "use_plugins",
    "Run",
    "RecxError",
    "arg",
    "Sampler",
    "Negatives",
    "Batch",
    "Loss",
    "LossInput",
    "Bundle",
    "Model",
    "Metric",
    "TopK",
    "Exposure",
    "Catalogue",
    "register_sampler",
    "register_loss",
    "register_model",
    "register_format",
    "register_metric",
    "__version__",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _REGISTRIES:
        module, registry = _REGISTRIES[name]
        return getattr(importlib.import_module(module), registry).register
    raise AttributeError(f"module 'recx' has no attribute {name!r}")
