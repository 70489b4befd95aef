"""The metric contract (docs/design.md "Evaluation conventions"): per-user values that do not depend on the batch,
higher for better lists (accuracy metrics), blind past the cut-off, summing over the strata when additive;
catalogue-level values that are a function of each replicate's counts alone."""

from __future__ import annotations

import torch

from recx.eval.catalogue import Catalogue, Exposure, exposure_counts
from recx.eval.metrics.registry import LEVELS, METRICS, Metric, TopK
from recx.eval.strata import STRATA, popularity_strata


def _fail(name: str, message: str) -> None:
    raise AssertionError(f"metric {name!r}: {message}")


def random_catalogue(n_items: int = 60, n_users: int = 200, seed: int = 0) -> Catalogue:
    """Random training popularity (0 .. n_users) and recx's strata of it, with a held-out share per stratum."""
    generator = torch.Generator().manual_seed(seed)
    popularity = torch.randint(0, n_users + 1, (n_items,), generator=generator)
    share = torch.rand(len(STRATA), generator=generator, dtype=torch.float64)
    return Catalogue(popularity.to(torch.float64), popularity_strata(popularity), n_users, share / share.sum())


def random_lists(
    seed: int = 0, users: int = 64, depth: int = 20, n_items: int = 60
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random lists of distinct items [U, K] (a few short ones: -1 where they end), their hits (only on listed
    places), each user's held-out count (at least its hits, at least 1), each place's stratum (-1 where a list
    ends) against `random_catalogue(n_items)`."""
    generator = torch.Generator().manual_seed(seed)
    items = torch.argsort(torch.rand(users, n_items, generator=generator), dim=1)[:, :depth]
    ends = torch.randint(depth // 2, depth + 1, (users,), generator=generator)
    ends[: users // 2] = depth
    items = torch.where(torch.arange(depth)[None, :] < ends[:, None], items, -1)
    hits = (torch.rand(users, depth, generator=generator) < 0.2) & (items >= 0)
    n_relevant = (hits.sum(1) + torch.randint(0, 4, (users,), generator=generator)).clamp_min(1)
    strata = torch.where(items >= 0, random_catalogue(n_items).strata[items.clamp_min(0)], -1)
    return items, hits, n_relevant, strata


def _top(items, hits, n_relevant, catalogue, rows=slice(None)) -> TopK:
    return TopK(hits[rows], n_relevant[rows], items[rows], catalogue)


def _check_cutoff(name: str, metric: Metric) -> None:
    catalogue = random_catalogue()
    items, hits, n_relevant, strata = random_lists()
    top = _top(items, hits, n_relevant, catalogue)
    for k in (1, 5, 20):
        values = metric.per_user(top, k)
        if values.dtype != torch.float64 or values.shape != (hits.shape[0],) or not torch.isfinite(values).all():
            _fail(name, f"per_user at k={k} must be finite float64 [U], got {values.dtype} {tuple(values.shape)}")
        half = metric.per_user(_top(items, hits, n_relevant, catalogue, slice(None, None, 2)), k)
        if not torch.equal(half, values[::2]):
            _fail(name, f"a user's value at k={k} depends on the other users of its batch")
        beyond_hits, beyond_items = hits.clone(), items.clone()
        beyond_hits[:, k:] = ~beyond_hits[:, k:] & (items[:, k:] >= 0)
        beyond_items[:, k:] = torch.where(items[:, k:] >= 0, items[:, k:].flip(1).clamp_min(0), -1)
        if not torch.equal(metric.per_user(TopK(beyond_hits, n_relevant, beyond_items, catalogue), k), values):
            _fail(name, f"the value at k={k} reads places past the cut-off")
        if metric.additive:
            parts = torch.stack([metric.per_user(top.within(strata == i), k) for i in range(len(STRATA))]).sum(0)
            if not torch.allclose(parts, values, rtol=0, atol=1e-12):
                _fail(name, f"additive, but the strata do not sum to the overall value at k={k}")
    if type(metric).per_user_at is not Metric.per_user_at:
        _check_all_cutoffs(name, metric, TopK(hits, n_relevant, items, catalogue, strata=strata))
    if metric.accuracy:
        full = torch.arange(20).repeat(8, 1)
        perfect = TopK(torch.ones(8, 20, dtype=torch.bool), torch.full((8,), 20), full, catalogue)
        empty = TopK(torch.zeros(8, 20, dtype=torch.bool), torch.full((8,), 20), full, catalogue)
        if not (metric.per_user(perfect, 10) > metric.per_user(empty, 10)).all():
            _fail(
                name,
                "a list of hits must score higher than a list without (validation keeps the highest); a metric "
                "that does not reward hits declares accuracy = False",
            )


def _check_all_cutoffs(name: str, metric: Metric, top: TopK) -> None:
    """per_user_at (every cut-off, every stratum at once) is per_user at each cut-off, in each stratum, bit for bit."""
    ks = [20, 1, 5, 5]
    values = metric.per_user_at(top, ks)
    parts = [top, *top.stratum_tops] if metric.additive else [top]
    if values.shape != (len(ks), len(parts), top.hits.shape[0]):
        _fail(name, f"per_user_at must be [len(ks), {len(parts)}, U], got {tuple(values.shape)}")
    for index, k in enumerate(ks):
        for part, part_top in enumerate(parts):
            if not torch.equal(values[index, part], metric.per_user(part_top, k)):
                where = "overall" if part == 0 else f"in stratum {STRATA[part - 1]}"
                _fail(name, f"per_user_at at k={k} {where} is not per_user there")


def _check_catalogue(name: str, metric: Metric) -> None:
    """One value per weighting of the users (rows computed on their own), finite float64, keyed by "all" or strata,
    the same under any order of the users and for the same lists counted twice as often (a catalogue metric is a
    function of the exposure counts alone)."""
    catalogue = random_catalogue()
    items = random_lists()[0]
    generator = torch.Generator().manual_seed(1)
    weights = torch.randint(0, 3, (5, items.shape[0]), generator=generator).to(torch.float64)
    weights[0] = 1.0
    for k in (1, 5, 20):
        counts = exposure_counts(items, k, catalogue.n_items, weights)
        found = metric.from_exposure(Exposure(counts, weights.sum(1), catalogue), k)
        if not found or not set(found) <= {"all", *STRATA}:
            _fail(name, f"from_exposure must return values keyed by 'all' or a stratum ({', '.join(STRATA)})")
        for key, values in found.items():
            if values.dtype != torch.float64 or values.shape != (5,) or not torch.isfinite(values).all():
                _fail(name, f"{key} at k={k} must be finite float64 [R], got {values.dtype} {tuple(values.shape)}")
        for row in range(5):
            alone = metric.from_exposure(Exposure(counts[row : row + 1], weights[row : row + 1].sum(1), catalogue), k)
            if any(not torch.allclose(alone[key][0], found[key][row], rtol=1e-12, atol=1e-12) for key in found):
                _fail(name, f"replicate {row} at k={k} depends on the other replicates (compute each row alone)")
        if metric.counts_only:  # every cut-off in one call: k is read only through the counts
            other = metric.from_exposure(Exposure(counts, weights.sum(1), catalogue), k + 7)
            if any(not torch.equal(other[key], found[key]) for key in found):
                _fail(name, f"counts_only, but the value at k={k} depends on k beyond the counts")
        shuffled = exposure_counts(items.flip(0), k, catalogue.n_items)[None, :]
        first = metric.from_exposure(Exposure(counts[:1], weights[:1].sum(1), catalogue), k)
        again = metric.from_exposure(Exposure(shuffled, weights[:1].sum(1), catalogue), k)
        if any(not torch.equal(first[key], again[key]) for key in first):
            _fail(name, f"the value at k={k} depends on the order of the users")


def check_metric(name: str) -> None:
    """The checks of the metric's kind: a per-user cut-off metric's per_user, a catalogue-level metric's
    from_exposure, or a full-ranking metric's per_user_scores."""
    metric_class = METRICS.get(name)
    if metric_class.level not in LEVELS:
        _fail(name, f"level {metric_class.level!r}; expected one of {', '.join(LEVELS)}")
    metric = metric_class()
    if not metric.cutoff:
        _check_scores(name, metric)
    elif metric.level == "catalogue":
        _check_catalogue(name, metric)
    else:
        _check_cutoff(name, metric)


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
