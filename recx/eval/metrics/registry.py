"""The metric registry, the metric contract and the per-user values of a top-K evaluation.

A metric is a `Metric` subclass registered by name (`@METRICS.register("ndcg")`), with a one-line `summary`, its
table `heading`, and one of:
- `per_user(top, k)`: a per-user cut-off metric (`level = "user"`, the default): one value per evaluated user from
  its top-K list (`TopK`: hits, held-out count, item ids, the catalogue), averaged over users; it gets per-user rows,
  strata (when `additive`) and the paired tests. Or, in its place, `per_user_at(top, ks)`: the values at every
  cut-off (and, when additive, in every stratum) at once, from terms `TopK` computes once for all the metrics of a
  group of users (`TopK.cutoff_sums`: one sum a cut-off for every metric together); `per_user` is then its value at
  one cut-off. recx's metrics implement `per_user_at`; a metric implementing `per_user` alone is computed at each
  cut-off and in each stratum in turn (the same values, more operations);
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
from collections.abc import Sequence
from typing import Callable, ClassVar

import torch

from recx.core.args import class_problem
from recx.core.registry import Registry
from recx.eval.catalogue import Catalogue, Exposure, cutoff_counts
from recx.eval.strata import STRATA

LEVELS = ("user", "catalogue")


class NotGiven(ValueError):
    """A metric read what its caller did not give (`TopK.items`, `catalogue`, `held_out`): `per_user_metrics` then
    leaves that metric out."""


class Sums(dict):
    """{term: float64 [len(ks), rows, U]}: each term's sum over the first k places, at each cut-off k (`TopK.cutoff_sums`);
    a term the evaluation could not compute (no item ids, no catalogue) raises NotGiven."""

    def __missing__(self, term: str) -> torch.Tensor:
        raise NotGiven(f"this evaluation was not given what the term {term!r} needs (TopK.items, TopK.catalogue)")


class TopK:
    """Each evaluated user's top-K list: `hits` bool [U, K] in rank order (place r is rank r + 1), `n_relevant` [U]
    (> 0) the user's held-out items; when the evaluation gives them, `items` int64 [U, K] the listed item ids (-1
    where a list ends: lists from other systems may be short), `catalogue` (recx.eval.catalogue.Catalogue: item
    popularity, strata, n_items, training users), `held_out` (a function returning the users' held-out items as
    CSR rows (indptr [U + 1], indices), computed on first use) and `strata` int64 [U, K] (each place's popularity
    stratum, an index of recx.eval.strata.STRATA, -1 where a list ends: an additive metric is then also reported
    per stratum, `parts`). Terms several metrics share are computed once, on first use."""

    def __init__(
        self,
        hits: torch.Tensor,
        n_relevant: torch.Tensor,
        items: torch.Tensor | None = None,
        catalogue: Catalogue | None = None,
        held_out: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
        strata: torch.Tensor | None = None,
    ):
        self.hits, self.n_relevant, self.strata = hits, n_relevant, strata
        self._items, self._catalogue, self._held_out = items, catalogue, held_out
        self._memo: dict[tuple, torch.Tensor] = {}
        self._sums: dict[tuple[int, ...], Sums] = {}

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

    def listed_at(self, ks: Sequence[int]) -> torch.Tensor:
        """bool [len(ks), U]: whether each list holds an item within each cut-off (`listed(k).any(1)` at each k)."""
        key = ("listed_at", *ks)
        if key not in self._memo:
            self._memo[key] = self.cutoff_sums(ks)["listed"][:, 0] > 0
        return self._memo[key]

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

    @property
    def parts(self) -> tuple[str, ...]:
        """What an additive metric reports: "all" (the whole list), then each stratum when `strata` is given."""
        return ("all",) if self.strata is None else ("all", *STRATA)

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

    def ideal_dcgs(self, ks: Sequence[int]) -> torch.Tensor:
        """`ideal_dcg` at each cut-off, float64 [len(ks), U]."""
        cut = torch.minimum(self.n_relevant[None, :], self.cutoffs(ks)[:, None])
        return torch.cumsum(self.discounts, 0)[cut - 1]

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

    @functools.cached_property
    def stratum_tops(self) -> list["TopK"]:
        """`within` each stratum of `strata`, in STRATA's order (none when `strata` is not given)."""
        return [] if self.strata is None else [self.within(self.strata == index) for index in range(len(STRATA))]

    def cutoffs(self, ks: Sequence[int]) -> torch.Tensor:
        """int64 [len(ks)] on the lists' device, made there (no copy from the host: on CUDA a blocking copy would
        wait for every batch queued before it)."""
        key = ("cutoffs", *ks)
        if key not in self._memo:
            steps = torch.arange(max(ks) + 1, device=self.hits.device)
            self._memo[key] = torch.stack([steps[k] for k in ks])
        return self._memo[key]

    @functools.cached_property
    def part_hits(self) -> torch.Tensor:
        """bool [len(parts), U, K]: the hits, then (with `strata`) the hits on each stratum's items."""
        if self.strata is None:
            return self.hits[None]
        strata = torch.arange(len(STRATA), device=self.hits.device)[:, None, None]
        return torch.cat([self.hits[None], self.hits[None] & (self.strata[None] == strata)])

    def cutoff_sums(self, ks: Sequence[int]) -> Sums:
        """{term: float64 [len(ks), rows, U]}: the per-place terms recx's metrics read, each summed over the first k
        places for every k of `ks` (bit for bit `term[..., :k].sum(-1)`: one sum a cut-off for all the terms):
        - "gains" and "hits" (rows: `parts`): hit_r / log2(r + 2) and hit_r, on the whole list, then each stratum;
        - with `items` (one row each): "listed" (1 where a place holds an item) and "list_discounts"
          (listed_r / log2(r + 2));
        - with `items` and `catalogue` (one row each): "popularity" (the listed items' φ(i)), "tail" (1 on the long
          tail, recx's unpopular stratum) and "novelty_gains" (hit_r / log2(r + 2) · (1 - φ(i) / |U|), EPC's).
        Computed once for a TopK and a list of cut-offs; a term the evaluation could not compute raises NotGiven."""
        key = tuple(ks)
        if key not in self._sums:
            names, table = self._place_terms()
            sums = torch.stack([table[..., :k].sum(-1) for k in ks])
            self._sums[key] = Sums(
                {name: sums[:, first : first + rows] for name, (first, rows) in names.items()}  # views
            )
        return self._sums[key]

    def _place_terms(self) -> tuple[dict[str, tuple[int, int]], torch.Tensor]:
        """({term: (first row, rows)}, float64 [rows, U, K]): the terms of `cutoff_sums`, each written in place."""
        hits, n_parts = self.part_hits, len(self.parts)
        rows = {"gains": n_parts, "hits": n_parts}
        if self._items is not None:
            rows |= {"listed": 1, "list_discounts": 1}
            if self._catalogue is not None:
                rows |= {"popularity": 1, "tail": 1, "novelty_gains": 1}
        at, first = {}, 0
        for name, count in rows.items():
            at[name], first = (first, count), first + count
        table = torch.empty((first, *self.hits.shape), dtype=torch.float64, device=self.hits.device)

        def term(name: str) -> torch.Tensor:
            return table[at[name][0] : at[name][0] + at[name][1]]

        torch.mul(hits, self.discounts, out=term("gains"))
        term("hits").copy_(hits)
        if self._items is not None:
            listed = self.items >= 0
            term("listed").copy_(listed)
            torch.mul(listed[None], self.discounts, out=term("list_discounts"))
            if self._catalogue is not None:  # popularity, tail and novelty read at the places, 0 where lists end
                catalogue = self.catalogue
                novelty = 1.0 - catalogue.popularity / max(catalogue.n_users, 1)
                per_item = torch.stack(
                    [catalogue.popularity.to(torch.float64), catalogue.tail.to(torch.float64), novelty]
                )
                placed = table[at["popularity"][0] : at["novelty_gains"][0] + 1]
                torch.index_select(per_item, 1, self.items.clamp_min(0).reshape(-1), out=placed.view(3, -1))
                placed.masked_fill_(~listed, 0.0)
                novelty_gains = term("novelty_gains")
                torch.mul(term("gains")[:1], novelty_gains, out=novelty_gains)  # hit · novelty · discount
        return at, table


class Metric:
    """A ranking metric. Subclasses set `summary` and `heading` and implement `per_user` or `per_user_at` (per-user
    cut-off metrics), `from_exposure` (`level = "catalogue"`) or `per_user_scores` (`cutoff = False`)."""

    summary: ClassVar[str] = ""
    heading: ClassVar[str] = ""  # the tables' column title (default: the name)
    cutoff: ClassVar[bool] = True  # name@k over top-K lists; False: over each user's full score row (recx eval --auc)
    level: ClassVar[str] = "user"  # "user": per-user values averaged over users; "catalogue": one value of all lists
    accuracy: ClassVar[bool] = True  # rewards hits (higher is better): may be the validation metric when per-user
    additive: ClassVar[bool] = False  # strata sum to the overall value: reported per popularity stratum
    needs_list: ClassVar[bool] = False  # per user over the listed items: no value for a user without a list
    in_table: ClassVar[bool] = False  # a column of the report's table by default
    # catalogue-level: from_exposure reads k only through the counts, so every cut-off is computed in one call, each
    # cut-off's counts as rows of one Exposure (k then the largest)
    counts_only: ClassVar[bool] = False

    def per_user(self, top: TopK, k: int) -> torch.Tensor:
        """float64 [U]: each user's value at cut-off k (k <= top.max_k); by default `per_user_at` at k alone."""
        if type(self).per_user_at is Metric.per_user_at:
            raise NotImplementedError
        return self.per_user_at(top, [k])[0, 0]

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        """float64 [len(ks), P, U]: each user's value at every cut-off of `ks`, for the whole list (P = 1) or, for an
        additive metric, for each of `top.parts` (the whole list, then each stratum: P = len(top.parts)), bit for bit
        `per_user` of `top` and of its `stratum_tops`. By default `per_user` at each cut-off, in each part."""
        tops = [top, *top.stratum_tops] if self.additive else [top]
        return torch.stack([torch.stack([self.per_user(part, k) for part in tops]) for k in ks])

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
    if method == "per_user" and obj.per_user_at is not Metric.per_user_at:
        return None  # per_user is per_user_at at one cut-off
    level = "a full-ranking" if not obj.cutoff else f"a {obj.level}-level"
    needed = "per_user (or per_user_at)" if method == "per_user" else method
    return class_problem(obj, Metric, (method,), with_args=False) and f"{level} metric must implement {needed}"


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


def per_user_table(
    hits: torch.Tensor,
    n_relevant: torch.Tensor,
    ks: Sequence[int],
    hit_strata: torch.Tensor | None = None,
    items: torch.Tensor | None = None,
    catalogue: Catalogue | None = None,
    held_out: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> tuple[list[tuple[str, int, str]], torch.Tensor]:
    """`per_user_metrics` as (keys, float64 [len(keys), U]): row i holds key i's per-user values (one tensor for
    every metric, cut-off and stratum: the evaluator averages them in one reduction)."""
    top = TopK(hits, n_relevant, items, catalogue, held_out, hit_strata)
    keys: list[tuple[str, int, str]] = []
    blocks = []
    for name, metric in cutoff_metrics():
        try:
            values = metric.per_user_at(top, ks)
            if metric.needs_list:
                top.listed_at(ks)  # reads the item ids
        except NotGiven:
            if items is not None and catalogue is not None and held_out is not None:
                raise
            continue
        parts = top.parts if metric.additive else ("all",)
        if values.shape != (len(ks), len(parts), hits.shape[0]):
            raise ValueError(
                f"metric {name!r}: per_user_at gave {tuple(values.shape)}, expected {(len(ks), len(parts), hits.shape[0])}"
            )
        if metric.needs_list:  # the whole list's value: none (NaN) for a user whose list holds no item within k
            valued = torch.where(top.listed_at(ks)[:, None, :], values[:, :1], torch.nan)
            values = valued if len(parts) == 1 else torch.cat([valued, values[:, 1:]], 1)
        keys += [(name, k, part) for k in ks for part in parts]
        blocks.append(values.reshape(-1, hits.shape[0]))
    return keys, torch.cat(blocks) if blocks else hits.new_zeros((0, hits.shape[0]), dtype=torch.float64)


def per_user_metrics(
    hits: torch.Tensor,
    n_relevant: torch.Tensor,
    ks: Sequence[int],
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
    keys, values = per_user_table(hits, n_relevant, ks, hit_strata, items, catalogue, held_out)
    return dict(zip(keys, values, strict=True))


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
    [n_items]: R = 1) and the weighted number of lists [R] (or a scalar). A `counts_only` metric is computed at every
    k in one call (the cut-offs' counts stacked as rows, when each is stored row by row: a row's sums then run in
    the same order as alone), any other at each k in turn."""
    ks = list(counts)
    rows = {k: at_k.reshape(-1, catalogue.n_items) for k, at_k in counts.items()}
    lists = lists.reshape(-1).to(torch.float64)
    together = len(ks) > 1 and all(at_k.is_contiguous() for at_k in rows.values())
    stacked: Exposure | None = None
    found: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
    metrics = cutoff_metrics("catalogue")
    for name, metric in metrics:
        if metric.counts_only and together:
            if stacked is None:
                stacked = Exposure(torch.cat(list(rows.values())), lists.expand(len(ks), -1).reshape(-1), catalogue)
            values = metric.from_exposure(stacked, max(ks))
            for index, k in enumerate(ks):
                found[(name, k)] = {key: v.reshape(len(ks), -1)[index] for key, v in values.items()}
        else:
            for k in ks:
                found[(name, k)] = metric.from_exposure(Exposure(rows[k], lists, catalogue), k)
    return {(name, k, key): v for k in ks for name, _ in metrics for key, v in found[(name, k)].items()}


def list_counts(items: torch.Tensor, ks: list[int], n_items: int) -> dict[int, torch.Tensor]:
    """{k: float64 [n_items]}: how many of the lists items [U, K] (-1 where a list ends) hold each item in the top k."""
    return dict(zip(ks, cutoff_counts(items, ks, n_items), strict=True))
