"""Significance tests of `recx report` against plain references: the paired t statistic by its formula in float64,
the randomisation test by enumerating every sign assignment, Holm and Bonferroni on hand-worked p-values."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from recx.reports import stats


def test_paired_t_matches_its_formula():
    rng = np.random.default_rng(0)
    x, y = rng.random(50), rng.random(50) * 0.9
    d = x - y
    t = d.mean() / (d.std(ddof=1) / math.sqrt(d.size))
    p = 2 * scipy_stats.t.sf(abs(t), d.size - 1)
    assert stats.paired_t(x, y) == pytest.approx((t, p), rel=1e-10)
    assert stats.paired_t(x, x) == (0.0, 1.0)


def test_randomisation_test_is_exact_on_small_samples():
    rng = np.random.default_rng(1)
    x, y = rng.random(10), rng.random(10)
    d = x - y
    observed = abs(d.mean())
    flips = np.array(list(itertools.product([1.0, -1.0], repeat=d.size)))
    exact = np.mean(np.abs((flips * d).mean(axis=1)) >= observed - 1e-12)
    assert stats.randomisation(x, y, resamples=5000) == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize("shift", [0.0, 0.02, 0.05])
def test_randomisation_test_matches_scipy_permutation_test(shift):
    rng = np.random.default_rng(2)
    x = rng.random(300)
    y = x - shift + rng.normal(0, 0.3, 300)
    reference = scipy_stats.permutation_test(
        (x, y),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        vectorized=True,
        permutation_type="samples",
        n_resamples=20_000,
        rng=np.random.default_rng(0),
    ).pvalue
    # both Monte Carlo with 20,000 resamples: standard error of each p at most 0.0036
    assert stats.randomisation(x, y, resamples=20_000, batch_cells=1000) == pytest.approx(reference, abs=0.015)
    assert stats.randomisation(x, y, 2000, seed=3) == stats.randomisation(x, y, 2000, seed=3)


def test_holm_and_bonferroni_on_worked_values():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert stats.adjust(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.adjust(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert stats.adjust([0.5, 0.9], "holm") == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError):
        stats.adjust(p, "sidak")


def test_a_difference_too_small_for_four_decimals_is_shown_in_scientific_notation():
    from recx.reports.significance import signed

    assert signed(-3.2e-6) == "-3.20e-06"  # not "-0.0000" beside a significance mark
    assert signed(2.4e-5) == "+2.40e-05"
    assert signed(-0.0) == signed(0.0) == "+0.0000"
    assert signed(0.0123) == "+0.0123"
    assert signed(-24.8687) == "-24.8687"
