"""Losses, found by name in `recx.losses.registry.LOSSES`; each takes a `LossInput` (scores, log_q, weights,
representations), and other forms of a step's data where its `takes` says so. A loss is one module of this package
(found by the registry), or a plugin's."""
