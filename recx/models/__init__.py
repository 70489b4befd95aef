"""Models: each gives query (user) and item representations whose inner product is the score."""

from recx.core.registry import Registry

MODELS: Registry = Registry("model")

from recx.models import als, lightgcn, mf, multvae, nonlinear_mf, popularity  # noqa: E402,F401  (registration)
