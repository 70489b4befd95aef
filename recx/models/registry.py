"""The model registry: every model by the name configs use; built-ins are the modules of recx.models and recx.models.als (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.args import class_problem
from recx.core.registry import Registry


def _problem(obj) -> str | None:
    """A model is a Model subclass with `representations` and a well-formed Args (refused when it registers)."""
    from recx.models.base import Model

    return class_problem(obj, Model, ("representations",))


MODELS: Registry = Registry("model", "recx.models", "recx.models.als", check=_problem)


def own_objective(name: str) -> bool:
    """A registered model with its own objective (`losses = ()`: ALS, MostPop): it trains with no loss and no
    sampler, whatever its configuration's defaults name."""
    return name in MODELS and MODELS.get(name).losses == ()


def model_label(name: str) -> str:
    """The model's name in report rows: its class's `label` (MostPop: mostpop), else its registered name."""
    return (MODELS.get(name).label or name) if name in MODELS else name
