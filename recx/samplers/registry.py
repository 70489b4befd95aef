"""The sampler registry: every sampler by the name configs use; built-ins are the modules of recx.samplers (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.registry import Registry

SAMPLERS: Registry = Registry("sampler", "recx.samplers")
