"""The loss registry: every loss by the name configs use; built-ins are the modules of recx.losses (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.args import class_problem
from recx.core.registry import Registry


def _problem(obj) -> str | None:
    """A loss is a Loss subclass with `__call__`, the method of each input it `takes`, and a well-formed Args
    (refused when it registers)."""
    from recx.losses.base import INPUTS, Loss

    takes = getattr(obj, "takes", ())
    unknown = [kind for kind in takes if kind not in INPUTS] if isinstance(takes, tuple) else [repr(takes)]
    if unknown:
        return f"its takes names {', '.join(map(str, unknown))}: expected a tuple of {', '.join(INPUTS)}"
    return class_problem(obj, Loss, ("__call__", *(INPUTS[kind] for kind in takes if kind != "scores")))


LOSSES: Registry = Registry("loss", "recx.losses", check=_problem)
