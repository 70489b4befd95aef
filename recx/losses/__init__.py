"""Losses, found by name in `LOSSES`. Each takes (pos_scores [B], neg_scores [B, n], pos_log_q [B], neg_log_q)."""
from recx.registry import Registry

LOSSES: Registry = Registry("loss")

from recx.losses import bpr, softmax  # noqa: E402,F401  (registration)
