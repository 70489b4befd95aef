"""The runner registry: every runner by the name configs use; built-ins are the modules of recx.training.runners (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.registry import Registry

RUNNERS: Registry = Registry("runner", "recx.training.runners")
