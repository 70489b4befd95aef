"""The sampler registry: every sampler by the name configs use; built-ins are the modules of recx.samplers (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.args import class_problem
from recx.core.registry import Registry


def _problem(obj) -> str | None:
    """A sampler is a Sampler subclass with `sample` and a well-formed Args (refused when it registers)."""
    from recx.samplers.base import Sampler

    return class_problem(obj, Sampler, ("sample",))


SAMPLERS: Registry = Registry("sampler", "recx.samplers", check=_problem)


def new_sampler(name: str, dataset, n_negatives: int, args: dict, generator, kernels: str = "auto"):
    """The sampler registered as `name`, built from its arguments as a configuration holds them (`args`: a mapping of
    its Args' fields): the one way training, the kit and the sampler divergence report construct a sampler."""
    sampler_class = SAMPLERS.get(name)
    return sampler_class(dataset, n_negatives, sampler_class.Args(**args), generator, kernels)
