"""The metric contract (docs/design.md "Evaluation conventions"): per-user values that do not depend on the batch,
higher for better lists, blind past the cut-off, summing over the strata when additive."""

from __future__ import annotations

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK
from recx.eval.strata import STRATA


def _fail(name: str, message: str) -> None:
    raise AssertionError(f"metric {name!r}: {message}")


def _lists(seed: int = 0, users: int = 64, depth: int = 20) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random hits [U, K], each user's held-out count (at least its hits, at least 1), each place's stratum."""
    generator = torch.Generator().manual_seed(seed)
    hits = torch.rand(users, depth, generator=generator) < 0.2
    n_relevant = hits.sum(1) + torch.randint(0, 4, (users,), generator=generator)
    strata = torch.randint(0, len(STRATA), (users, depth), generator=generator)
    return hits, n_relevant.clamp_min(1), strata


def _check_cutoff(name: str, metric: Metric) -> None:
    hits, n_relevant, strata = _lists()
    top = TopK(hits, n_relevant)
    for k in (1, 5, 20):
        values = metric.per_user(top, k)
        if values.dtype != torch.float64 or values.shape != (hits.shape[0],) or not torch.isfinite(values).all():
            _fail(name, f"per_user at k={k} must be finite float64 [U], got {values.dtype} {tuple(values.shape)}")
        half = metric.per_user(TopK(hits[::2], n_relevant[::2]), k)
        if not torch.equal(half, values[::2]):
            _fail(name, f"a user's value at k={k} depends on the other users of its batch")
        beyond = hits.clone()
        beyond[:, k:] = ~beyond[:, k:]
        if not torch.equal(metric.per_user(TopK(beyond, n_relevant), k), values):
            _fail(name, f"the value at k={k} reads places past the cut-off")
        if metric.additive:
            parts = torch.stack([metric.per_user(top.within(strata == i), k) for i in range(len(STRATA))]).sum(0)
            if not torch.allclose(parts, values, rtol=0, atol=1e-12):
                _fail(name, f"additive, but the strata do not sum to the overall value at k={k}")
    perfect = TopK(torch.ones(8, 20, dtype=torch.bool), torch.full((8,), 20))
    empty = TopK(torch.zeros(8, 20, dtype=torch.bool), torch.full((8,), 20))
    if not (metric.per_user(perfect, 10) > metric.per_user(empty, 10)).all():
        _fail(name, "a list of hits must score higher than a list without (validation keeps the highest)")


def _check_scores(name: str, metric: Metric) -> None:
    generator = torch.Generator().manual_seed(0)
    relevant = torch.rand(16, 40, generator=generator) < 0.2
    relevant[:, 0] = True
    scores = torch.randn(16, 40, generator=generator)
    perfect = metric.per_user_scores(relevant.double() + 0.01 * scores, relevant, 0.1)
    reversed_ = metric.per_user_scores(-relevant.double() + 0.01 * scores, relevant, 0.1)
    for key, values in perfect.items():
        if values.dtype != torch.float64 or values.shape != (16,) or not torch.isfinite(values).all():
            _fail(name, f"{key} must be finite float64 [U]")
        if not (values > reversed_[key]).all():
            _fail(name, f"{key}: a ranking of the held-out items first must score higher than the reverse")


def check_metric(name: str) -> None:
    """The checks of the metric's kind: a cut-off metric's per_user, or a full-ranking metric's per_user_scores."""
    metric = METRICS.get(name)()
    if metric.cutoff:
        _check_cutoff(name, metric)
    else:
        _check_scores(name, metric)
