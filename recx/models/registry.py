"""The model registry: every model by the name configs use; built-ins are the modules of recx.models and recx.models.als (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.registry import Registry

MODELS: Registry = Registry("model", "recx.models", "recx.models.als")
