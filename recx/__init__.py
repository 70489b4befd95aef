"""recx: an experiment runner for negative sampling, softmax approximation and losses in implicit-feedback recommendation."""

__version__ = "0.1.0"
