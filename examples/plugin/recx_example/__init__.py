"""An example recx plugin: the sampler `mixture`, the loss `hinge`, the per-user metric `map` and the
catalogue-level metric `tail_coverage`. Importing this package registers them (recx imports it through the
`recx.plugins` entry point, or `--plugin`)."""

from recx_example import average_precision, hinge, mixture, tail_coverage  # noqa: F401  (registration)

__version__ = "0.1.0"
