"""The metric registry, the metric contract and the per-user values of a top-K evaluation.

A metric is a `Metric` subclass registered by name (`@METRICS.register("ndcg")`), with a one-line `summary`, its
table `heading`, and one of:
- `per_user(top, k)`: a per-user cut-off metric (`level = "user"`, the default): one value per evaluated user from
  its top-K list (`TopK`: hits, held-out count, item ids, the catalogue), averaged over users; it gets per-user rows,
  strata (when `additive`) and the paired tests;
- `from_exposure(exposure, k)`: a catalogue-level cut-off metric (`level = "catalogue"`): one value from all users'
  lists together, as a function of how often each item is recommended (`Exposure`: counts per item, vectorised over
  R weightings of the users so that recx can bootstrap it); reported with a bootstrap confidence interval over users
  and compared by a paired bootstrap;
- `per_user_scores(scores, relevant, beta)`: a metric of the full score row (`cutoff = False`, `recx eval --auc`).
`accuracy`: the metric rewards hits (higher is better); only a per-user accuracy metric may be `valid_metric`.
`additive`: the metric sums over the popularity strata (it is reported per stratum).
`needs_list`: a per-user metric of the items a list holds (ARP, APLT, EPC): computed over the items the list holds
within the cut-off (a short list over its own items), and a user whose list holds none has no value (not 0), so the
average runs over the users with a list. An accuracy metric counts a missing place as a miss instead: every
evaluated user has a value. Catalogue-level metrics count the items of the lists there are (`Exposure.lists`: the
lists holding an item).
"""

from __future__ import annotations

import functools
from typing import Callable, ClassVar

import torch

from recx.core.args import class_problem
from recx.core.registry import Registry
from recx.eval.catalogue import Catalogue, Exposure, exposure_counts
from recx.eval.strata import STRATA

LEVELS = ("user", "catalogue")


class NotGiven(ValueError):
    """A metric read what its caller did not give (`TopK.items`, `catalogue`, `held_out`): `per_user_metrics` then
    leaves that metric out."""


class TopK:
    """Each evaluated user's top-K list: `hits` bool [U, K] in rank order (place r is rank r + 1), `n_relevant` [U]
    (> 0) the user's held-out items; when the evaluation gives them, `items` int64 [U, K] the listed item ids (-1
    where a list ends: lists from other systems may be short), `catalogue` (recx.eval.catalogue.Catalogue: item
    popularity, strata, n_items, training users) and `held_out` (a function returning the users' held-out items as
    CSR rows (indptr [U + 1], indices), computed on first use). Terms several metrics share are computed once, on
    first use."""

    def __init__(
        self,
        hits: torch.Tensor,
        n_relevant: torch.Tensor,
        items: torch.Tensor | None = None,
        catalogue: Catalogue | None = None,
        held_out: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
    ):
        self.hits, self.n_relevant = hits, n_relevant
        self._items, self._catalogue, self._held_out = items, catalogue, held_out

    @property
    def items(self) -> torch.Tensor:
        """int64 [U, K]: the listed items in rank order, -1 where a list ends."""
        if self._items is None:
            raise NotGiven("this evaluation was not given the lists' item ids (TopK.items)")
        return self._items

    @property
    def catalogue(self) -> Catalogue:
        """Item popularity, strata, n_items and training users (recx.eval.catalogue.Catalogue)."""
        if self._catalogue is None:
            raise NotGiven("this evaluation was not given the catalogue (TopK.catalogue)")
        return self._catalogue

    @functools.cached_property
    def held_out(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(indptr int64 [U + 1], indices int64): user row u's held-out items are indices[indptr[u]:indptr[u + 1]]."""
        if self._held_out is None:
            raise NotGiven("this evaluation was not given the users' held-out items (TopK.held_out)")
        return self._held_out()

    def listed(self, k: int) -> torch.Tensor:
        """bool [U, k]: the places within the cut-off that hold an item."""
        return self.items[:, :k] >= 0

    def list_lengths(self, k: int) -> torch.Tensor:
        """float64 [U]: the items each list holds within the cut-off (k, or fewer for a short list)."""
        return self.listed(k).sum(1).to(torch.float64)

    def per_place(self, per_item: torch.Tensor, k: int) -> torch.Tensor:
        """float64 [U, k]: per_item [n_items] read at each listed item, 0 where a list ends."""
        values = per_item.to(torch.float64)[self.items[:, :k].clamp_min(0)]
        return torch.where(self.listed(k), values, 0.0)

    @property
    def max_k(self) -> int:
        return self.hits.shape[1]

    @functools.cached_property
    def discounts(self) -> torch.Tensor:
        """1 / log2(r + 2) for ranks r = 0..K-1, float64 [K]."""
        return 1.0 / torch.log2(torch.arange(self.max_k, device=self.hits.device, dtype=torch.float64) + 2.0)

    @functools.cached_property
    def gains(self) -> torch.Tensor:
        """hit_r / log2(r + 2), float64 [U, K]."""
        return self.hits.to(torch.float64) * self.discounts

    def ideal_dcg(self, k: int) -> torch.Tensor:
        """Σ_{r < min(k, |T_u|)} 1 / log2(r + 2), float64 [U]."""
        return torch.cumsum(self.discounts, 0)[torch.clamp(self.n_relevant, max=k) - 1]

    def n_hits(self, k: int) -> torch.Tensor:
        """Hits in the top k, float64 [U]."""
        return self.hits[:, :k].sum(1).to(torch.float64)

    @functools.cached_property
    def first_hit(self) -> torch.Tensor:
        """The rank of the first hit, K when none, int64 [U]."""
        return torch.where(self.hits.any(1), self.hits.to(torch.int8).argmax(1), self.max_k)

    def within(self, stratum: torch.Tensor) -> "TopK":
        """The same lists counting only hits on items of a stratum (`stratum` bool [U, K]), same |T_u|."""
        return TopK(self.hits & stratum, self.n_relevant, self._items, self._catalogue, self._held_out)


class Metric:
    """A ranking metric. Subclasses set `summary` and `heading` and implement `per_user` (per-user cut-off
    metrics), `from_exposure` (`level = "catalogue"`) or `per_user_scores` (`cutoff = False`)."""

    summary: ClassVar[str] = ""
    heading: ClassVar[str] = ""  # the tables' column title (default: the name)
    cutoff: ClassVar[bool] = True  # name@k over top-K lists; False: over each user's full score row (recx eval --auc)
    level: ClassVar[str] = "user"  # "user": per-user values averaged over users; "catalogue": one value of all lists
    accuracy: ClassVar[bool] = True  # rewards hits (higher is better): may be the validation metric when per-user
    additive: ClassVar[bool] = False  # strata sum to the overall value: reported per popularity stratum
    needs_list: ClassVar[bool] = False  # per user over the listed items: no value for a user without a list
    in_table: ClassVar[bool] = False  # a column of the report's table by default

    def per_user(self, top: TopK, k: int) -> torch.Tensor:
        """float64 [U]: each user's value at cut-off k (k <= top.max_k)."""
        raise NotImplementedError

    def from_exposure(self, exposure: Exposure, k: int) -> dict[str, torch.Tensor]:
        """Catalogue-level: {"all" or a stratum name: float64 [R]} from exposure.counts [R, n_items], the times each
        item is in the users' top-k lists under R weightings of the users (compute each row on its own: row r is
        one bootstrap resample)."""
        raise NotImplementedError

    def per_user_scores(self, scores: torch.Tensor, relevant: torch.Tensor, beta: float) -> dict[str, torch.Tensor]:
        """{name: float64 [U]} from scores [U, n] (excluded items at -inf) and relevant bool [U, n]."""
        raise NotImplementedError


def _problem(obj) -> str | None:
    """A metric is a Metric subclass of a known level implementing its level's method (refused when it registers)."""
    if not (isinstance(obj, type) and issubclass(obj, Metric)):
        return f"it is not a subclass of recx's Metric ({obj!r})"
    if obj.level not in LEVELS:
        return f"its level is {obj.level!r}; expected one of {', '.join(LEVELS)}"
    method = "per_user_scores" if not obj.cutoff else {"user": "per_user", "catalogue": "from_exposure"}[obj.level]
    level = "a full-ranking" if not obj.cutoff else f"a {obj.level}-level"
    return class_problem(obj, Metric, (method,), with_args=False) and f"{level} metric must implement {method}"


METRICS: Registry = Registry("metric", "recx.eval.metrics", check=_problem)


def cutoff_metrics(level: str = "user") -> list[tuple[str, Metric]]:
    """The registered cut-off metrics of a level ("user" or "catalogue"), instantiated."""
    return [
        (name, METRICS.get(name)())
        for name in METRICS.names()
        if METRICS.get(name).cutoff and METRICS.get(name).level == level
    ]


def validation_metrics() -> list[str]:
    """The metrics `valid_metric` may name: per-user accuracy metrics with a cut-off."""
    return [name for name, metric in cutoff_metrics() if metric.accuracy]


def catalogue_level(metric: str) -> bool:
    """Whether a registered metric is catalogue-level (False for an unknown name)."""
    return metric in METRICS and METRICS.get(metric).level == "catalogue"


def table_metrics() -> tuple[str, ...]:
    """The report table's metrics by default (`in_table`)."""
    return tuple(name for name in METRICS.names() if METRICS.get(name).in_table)


def stratified_metrics() -> tuple[str, ...]:
    """The table metrics also shown per popularity stratum by default (the additive ones)."""
    return tuple(name for name in table_metrics() if METRICS.get(name).additive)


def heading(metric: str) -> str:
    """The tables' title of a metric (its `heading`, else the name capitalised: opauc(0.1) -> Opauc(0.1))."""
    return METRICS.get(metric).heading if metric in METRICS and METRICS.get(metric).heading else metric.capitalize()


def per_user_metrics(
    hits: torch.Tensor,
    n_relevant: torch.Tensor,
    ks: list[int],
    hit_strata: torch.Tensor | None = None,
    items: torch.Tensor | None = None,
    catalogue: Catalogue | None = None,
    held_out: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> dict[tuple[str, int, str], torch.Tensor]:
    """hits: bool [U, max(ks)] in rank order; n_relevant: [U] (> 0); hit_strata: stratum of each ranked item;
    items, catalogue, held_out: what `TopK` gives the metrics that read them.

    Returns {(metric, k, stratum): float64 [U]} for every registered per-user cut-off metric, with stratum "all"
    for the overall values and, for additive metrics, one key per popularity stratum; a metric that reads what the
    caller did not give (items, catalogue, held-out items) is left out. A `needs_list` metric's value is NaN for a
    user whose list holds no item (`average` leaves it out)."""
    top = TopK(hits, n_relevant, items, catalogue, held_out)
    strata = (
        [] if hit_strata is None else [(name, top.within(hit_strata == index)) for index, name in enumerate(STRATA)]
    )
    out: dict[tuple[str, int, str], torch.Tensor] = {}
    for name, metric in cutoff_metrics():
        try:
            for k in ks:
                out[(name, k, "all")] = metric.per_user(top, k)
                if metric.needs_list:
                    out[(name, k, "all")] = torch.where(top.listed(k).any(1), out[(name, k, "all")], torch.nan)
                if metric.additive:
                    for stratum, restricted in strata:
                        out[(name, k, stratum)] = metric.per_user(restricted, k)
        except NotGiven:
            if items is not None and catalogue is not None and held_out is not None:
                raise
            for key in [key for key in out if key[0] == name]:
                del out[key]
    return out


def needs_list(metric: str) -> bool:
    """Whether a registered metric has no value for a user without a list (False for an unknown name)."""
    return metric in METRICS and METRICS.get(metric).needs_list


def average(key: tuple[str, int, str], values: torch.Tensor) -> torch.Tensor:
    """The mean of a key's per-user values [U]: over every user, or for a `needs_list` metric over the users with a
    value (NaN when none has one)."""
    return values.nanmean() if needs_list(key[0]) else values.mean()


def listed_users(items: torch.Tensor) -> torch.Tensor:
    """bool [U]: the lists items [U, K] (-1 where a list ends) that hold an item."""
    return (items >= 0).any(1)


def catalogue_metrics(
    counts: dict[int, torch.Tensor], lists: torch.Tensor, catalogue: Catalogue
) -> dict[tuple[str, int, str], torch.Tensor]:
    """{(metric, k, key): float64 [R]} of every registered catalogue-level metric from counts {k: [R, n_items]} (or
    [n_items]: R = 1) and the weighted number of lists [R] (or a scalar)."""
    out: dict[tuple[str, int, str], torch.Tensor] = {}
    for k, at_k in counts.items():
        exposure = Exposure(at_k.reshape(-1, catalogue.n_items), lists.reshape(-1).to(torch.float64), catalogue)
        for name, metric in cutoff_metrics("catalogue"):
            for key, values in metric.from_exposure(exposure, k).items():
                out[(name, k, key)] = values
    return out


def list_counts(items: torch.Tensor, ks: list[int], n_items: int) -> dict[int, torch.Tensor]:
    """{k: float64 [n_items]}: how many of the lists items [U, K] (-1 where a list ends) hold each item in the top k."""
    return {k: exposure_counts(items, k, n_items) for k in ks}
