"""Models: each gives query (user) and item representations whose inner product is the score."""
from recx.registry import Registry

MODELS: Registry = Registry("model")

from recx.models import als, lightgcn, mf, nonlinear_mf  # noqa: E402,F401  (registration)
