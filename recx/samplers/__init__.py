"""Negative samplers, found by name in `SAMPLERS`; each returns items and their log proposal probabilities."""

from recx.core.registry import Registry

SAMPLERS: Registry = Registry("sampler")

from recx.samplers import (  # noqa: E402,F401  (registration)
    bir,
    bir_importance,
    dns,
    full,
    in_batch,
    midx,
    popularity,
    quadratic_kernel,
    self_adversarial,
    softmax_v,
    uniform,
    xir,
)
