"""The loss registry: every loss by the name configs use; built-ins are the modules of recx.losses (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.registry import Registry

LOSSES: Registry = Registry("loss", "recx.losses")
