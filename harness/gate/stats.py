"""Small statistics for timing samples: the Mann-Whitney U test and robust summaries. Pure Python.

The gate asks, as asv does, whether two sets of timing samples differ (Mann-Whitney U,
two-sided) and only then whether the medians moved by more than a factor. The test is
rank-based, so a few outliers (a GC pause, a cold cache) cannot make a difference on
their own, and it assumes no distribution.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import cache

# Exact p-values up to this many sample pairs (n1 * n2, e.g. 20 against 20): the count table
# costs about (n1 * n2)**2 / 2 steps, milliseconds here, a second at 50 against 50. Beyond it
# the normal approximation is close to exact (scipy's "auto" switches to it sooner, past 8).
EXACT_MAX_PAIRS = 400


@dataclasses.dataclass(frozen=True, kw_only=True)
class MannWhitney:
    """u: U statistic of the first sample (pairs where a > b, ties count 1/2); p: two-sided p-value."""

    u: float
    p: float
    n1: int
    n2: int
    method: str  # "exact" or "normal"


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value any data can give with these sample counts (no ties).

    When it is above the significance level the test cannot reject, however different the
    samples: asv checks this before testing, and so do we.
    """
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based) and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mid = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = mid
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


@cache
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """counts[u] = number of arrangements of n1 + n2 distinct values whose U statistic is u."""
    # f(m, n) over u satisfies f(m, n)[u] = f(m-1, n)[u-n] + f(m, n-1)[u]: the largest value
    # belongs either to the first sample (beating all n of the second) or to the second.
    prev_row = [[1] for _ in range(n2 + 1)]  # m = 0: only u = 0
    for m in range(1, n1 + 1):
        row = [[1]]  # n = 0: only u = 0
        for n in range(1, n2 + 1):
            a = prev_row[n]  # f(m-1, n), shifted by n
            b = row[n - 1]  # f(m, n-1)
            out = [0] * (m * n + 1)
            for u, c in enumerate(a):
                out[u + n] += c
            for u, c in enumerate(b):
                out[u] += c
            row.append(out)
        prev_row = row
    return tuple(prev_row[n2])


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    """Two-sided Mann-Whitney U test of `a` against `b`.

    Exact when there are no ties and at most EXACT_MAX_PAIRS pairs; otherwise the normal
    approximation with tie and continuity corrections (scipy's "asymptotic" method).
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError(f"mann_whitney_u needs samples on both sides, got {n1=}, {n2=}")
    values = [float(x) for x in a] + [float(x) for x in b]
    if any(math.isnan(x) for x in values):
        raise ValueError("mann_whitney_u: samples contain NaN; drop them before testing")
    ranks, ties = _ranks(values)
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    has_ties = any(t > 1 for t in ties)
    if not has_ties and n1 * n2 <= EXACT_MAX_PAIRS:
        counts = _u_counts(n1, n2)
        total = math.comb(n1 + n2, n1)
        # The distribution is symmetric about n1*n2/2: take the tail on U's side, doubled.
        k = int(round(max(u1, n1 * n2 - u1)))
        upper = sum(counts[k:])
        return MannWhitney(u=u1, p=min(1.0, 2 * upper / total), n1=n1, n2=n2, method="exact")
    n = n1 + n2
    tie_term = sum(t**3 - t for t in ties) / (n * (n - 1))
    var = n1 * n2 / 12 * ((n + 1) - tie_term)
    if var <= 0:  # every value equal: no evidence of any difference
        return MannWhitney(u=u1, p=1.0, n1=n1, n2=n2, method="normal")
    z = (abs(u1 - mean) - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return MannWhitney(u=u1, p=min(1.0, p), n1=n1, n2=n2, method="normal")


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values of a family of tests, in the order given.

    Rejecting each test whose adjusted p is below alpha keeps the chance of any false rejection
    in the whole family below alpha (Holm 1979), where testing each alone at alpha would give one
    false alarm in about 1/alpha tests: a gate judges dozens of timings in one upgrade.
    """
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def median(xs: Sequence[float]) -> float:
    return quantile(xs, 0.5)


def quantile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), 0 <= q <= 1."""
    if not xs:
        raise ValueError("quantile of no samples")
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    min: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def summarize(xs: Sequence[float]) -> Summary:
    return Summary(n=len(xs), median=quantile(xs, 0.5), q1=quantile(xs, 0.25), q3=quantile(xs, 0.75), min=min(xs))
