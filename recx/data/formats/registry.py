"""The format registry: every format by the name configs use; built-ins are the modules of recx.data.formats (found there on the
first read), plugins register through the same decorator (recx.core.plugins)."""

from recx.core.registry import Registry

FORMATS: Registry = Registry("format", "recx.data.formats")
