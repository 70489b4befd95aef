"""Runners: how one epoch is run for a kind of model, found by the model class's `runner` attribute
in `recx.training.runners.registry.RUNNERS`.

- `interactions` (MF, LightGCN): shuffled training interactions in batches; sampler, loss and optimizer per step.
- `users` (Mult-VAE / FastVAE): shuffled users in batches, each with its training-history row.
- `alternating` (WRMF, RG², RG×): one pass of closed-form user and item solves; no optimizer.
- `none` (MostPop): nothing to train.
The loop (recx.training.fit) owns the epochs, validation, early stopping and checkpoints; a runner
owns what happens inside an epoch.
"""
