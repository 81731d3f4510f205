"""harness.gate.stats: the Mann-Whitney U test against scipy's, and the quantiles against numpy's."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.gate.stats import mann_whitney_u, min_p_value, quantile, summarize


def _draw(n: int, shift: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(shift, 1.0) for _ in range(n)]


@pytest.mark.parametrize(
    ("n1", "n2", "shift", "method"),
    [
        (5, 5, 0.0, "exact"),
        (5, 5, 3.0, "exact"),
        (6, 9, 0.8, "exact"),
        (10, 10, 1.0, "exact"),
        (20, 20, 0.6, "exact"),  # 400 pairs: EXACT_MAX_PAIRS, the largest exact test
        (20, 30, 0.3, "normal"),
        (40, 40, 0.5, "normal"),
        (60, 70, 0.4, "normal"),
    ],
)
def test_matches_scipy(n1: int, n2: int, shift: float, method: str) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    a, b = _draw(n1, 0.0, n1), _draw(n2, shift, n2 + 100)
    got = mann_whitney_u(a, b)
    assert (got.n1, got.n2, got.method) == (n1, n2, method)
    scipy_method = "exact" if method == "exact" else "asymptotic"
    want = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method=scipy_method)
    assert got.u == pytest.approx(want.statistic)
    assert got.p == pytest.approx(want.pvalue, rel=1e-9)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param([1, 2, 2, 3, 3, 3, 4], [2, 3, 4, 4, 5, 5], id="tie-groups"),
        pytest.param([1, 2, 3], [3, 4, 5], id="one-tied-pair"),  # two equal values are enough
        pytest.param([1], [2, 2, 2], id="variance-below-1"),  # the tie-corrected variance is 0.75, not 0
    ],
)
def test_ties_use_the_corrected_normal_approximation(a: list[float], b: list[float]) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    got = mann_whitney_u(a, b)
    want = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    assert (got.n1, got.n2, got.method) == (len(a), len(b), "normal")
    assert (got.u, got.p) == pytest.approx((want.statistic, want.pvalue))
    assert got.p < 1


def test_separated_samples_reach_the_smallest_p() -> None:
    # Five against five, every b above every a: the most extreme arrangement of 252.
    r = mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert r.u == 0
    assert r.p == pytest.approx(2 / 252) == pytest.approx(min_p_value(5, 5))


def test_identical_samples_show_no_difference() -> None:
    # Every value equal: each of the 64 pairs is a tie counting 1/2, and the variance is 0.
    r = mann_whitney_u([0.01] * 8, [0.01] * 8)
    assert (r.u, r.p, r.n1, r.n2, r.method) == (32, 1.0, 8, 8, "normal")
    # Exact, no ties, U at its mean: the doubled tail (8 of 6 orders) is capped at 1.
    r = mann_whitney_u([1.0, 4.0], [2.0, 3.0])
    assert (r.u, r.p, r.method) == (2, 1.0, "exact")
    same = [0.010, 0.011, 0.012, 0.013, 0.014]
    assert mann_whitney_u(same, list(reversed(same))).p == 1.0


def test_min_p_value_says_when_a_test_cannot_reject() -> None:
    assert min_p_value(1, 1) == 1.0  # one sample each: never significant
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(5, 5) < 0.01 < min_p_value(4, 5)
    # One sample against three: the lone sample lies outside the three in 2 of the 4 orders.
    assert min_p_value(1, 3) == min_p_value(3, 1) == pytest.approx(0.5)
    assert min_p_value(0, 5) == min_p_value(5, 0) == 1.0  # no samples on a side: no test


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        pytest.param([], [1.0], "samples on both sides", id="empty"),
        pytest.param([1.0, math.nan], [1.0], "^mann_whitney_u: samples contain NaN; drop them", id="nan"),
    ],
)
def test_bad_samples(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mann_whitney_u(a, b)


def test_quantiles_match_numpy() -> None:
    xs = _draw(11, 0.0, 3)
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))
    s = summarize(xs)
    assert (s.n, s.min) == (11, min(xs))
    assert s.median == quantile(xs, 0.5) and (s.q1, s.q3) == (quantile(xs, 0.25), quantile(xs, 0.75))
    assert quantile([1.0, 2.0], 0.5) == 1.5 and quantile([3.0, 1.0, 2.0, 4.0], 0.9) == pytest.approx(3.7)
    with pytest.raises(ValueError, match="^quantile of no samples$"):
        quantile([], 0.5)
    assert s.iqr == pytest.approx(float(np.quantile(xs, 0.75) - np.quantile(xs, 0.25)))
