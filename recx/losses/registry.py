"""The loss registry: every loss by the name configs use; built-ins are the modules of recx.losses (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.args import class_problem
from recx.core.registry import Registry


def _problem(obj) -> str | None:
    """A loss is a Loss subclass with `__call__` and a well-formed Args (refused when it registers)."""
    from recx.losses.base import Loss

    return class_problem(obj, Loss, ("__call__",))


LOSSES: Registry = Registry("loss", "recx.losses", check=_problem)
