"""Source formats for `recx prepare --format NAME`, found by name in `recx.data.formats.registry.FORMATS`. A
format is one module of this package (found by the registry), or a plugin's."""
