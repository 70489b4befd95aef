"""Ranking metrics, found by name in `recx.eval.metrics.registry.METRICS` (docs/design.md "Evaluation conventions").
A metric is one module of this package (found by the registry), or a plugin's.

A per-user metric gives one value per user; averages are taken over users with at least one held-out item. A metric
with a cut-off (`name@k`) reads each user's top-K list (`TopK`: hits in rank order, the listed item ids, the held-out
items, the catalogue's popularity and strata); one without (AUC) reads the user's full score row (`recx eval
--auc`). An additive metric (NDCG, Recall) is also reported per popularity stratum: it counts only hits on items of
the stratum and keeps the user's overall normaliser, so the strata sum exactly to the overall value. A
catalogue-level metric (coverage, Gini, entropy, exposure share) is one value of all users' lists, a function of how
often each item is recommended (`Exposure`), with a bootstrap interval over users (recx.eval.bootstrap).
"""
