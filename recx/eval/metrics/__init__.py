"""Ranking metrics, found by name in `recx.eval.metrics.registry.METRICS` (docs/design.md "Evaluation conventions").
A metric is one module of this package (found by the registry), or a plugin's.

Each metric gives per-user values; averages are taken over users with at least one held-out item. A metric with a
cut-off (`name@k`) reads each user's top-K list as hits in rank order (`TopK`); one without (AUC) reads the user's
full score row (`recx eval --auc`). An additive metric (NDCG, Recall) is also reported per popularity stratum: it
counts only hits on items of the stratum and keeps the user's overall normaliser, so the strata sum exactly to the
overall value.
"""
