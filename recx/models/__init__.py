"""Models, found by name in `recx.models.registry.MODELS`: each gives query (user) and item representations whose
inner product is the score. A model is one module of this package (or of `als/`), or a plugin's."""
