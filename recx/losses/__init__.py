"""Losses, found by name in `LOSSES`; each takes a `LossInput` (scores, log_q, weights, representations)."""

from recx.core.registry import Registry

LOSSES: Registry = Registry("loss")

from recx.losses import bce, bpr, directau, mawu, softmax  # noqa: E402,F401  (registration)
