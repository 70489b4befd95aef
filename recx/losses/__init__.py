"""Losses, found by name in `recx.losses.registry.LOSSES`; each takes a `LossInput` (scores, log_q, weights,
representations). A loss is one module of this package (found by the registry), or a plugin's."""
