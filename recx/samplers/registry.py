"""The sampler registry: every sampler by the name configs use; built-ins are the modules of recx.samplers (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.args import class_problem
from recx.core.registry import Registry


def _problem(obj) -> str | None:
    """A sampler is a Sampler subclass with `sample` and a well-formed Args (refused when it registers)."""
    from recx.samplers.base import Sampler

    return class_problem(obj, Sampler, ("sample",))


SAMPLERS: Registry = Registry("sampler", "recx.samplers", check=_problem)
