"""Negative samplers, found by name in `recx.samplers.registry.SAMPLERS`; each returns items and their log proposal
probabilities. A sampler is one module of this package (found by the registry), or a plugin's."""
