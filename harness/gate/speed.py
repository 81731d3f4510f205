"""Speed rows: each benchmark's timing samples, compared with a rank test past the noise threshold."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import defaultdict

from harness.core.numbers import multiple
from harness.gate import stats
from harness.gate.rows import Row, Status, fmt_seconds, grouped
from harness.gate.thresholds import Thresholds
from harness.store.read import Records, bench_key, samples
from harness.store.records import BenchRecord


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpeedComparison:
    """Two sets of timing samples, judged. status: worse, better, unchanged or insufficient."""

    status: str
    ratio: float  # candidate median / baseline median
    p: float | None
    text: str


def compare_samples(b: list[float], c: list[float], th: Thresholds) -> SpeedComparison:
    """One pair of timing samples judged alone: compare_family of one."""
    return compare_family([(b, c)], th)[0]


def compare_family(pairs: list[tuple[list[float], list[float]]], th: Thresholds) -> list[SpeedComparison]:
    """Each pair of timing samples judged by Mann-Whitney U, the p-values Holm-adjusted over the
    family (so that dozens of timings judged in one gate do not give a false alarm in one of about
    1/alpha of them), then the factor on the medians; never on too few samples."""
    tests: list[stats.MannWhitney | None] = []
    for b, c in pairs:
        enough = min(len(b), len(c)) >= th.min_samples and stats.min_p_value(len(b), len(c)) < th.alpha
        tests.append(stats.mann_whitney_u(b, c) if enough else None)
    tested = [t for t in tests if t is not None]
    adjusted = iter(stats.holm([t.p for t in tested]))
    m = len(tested)
    return [
        _judge(b, c, th, t, next(adjusted) if t is not None else None, m)
        for (b, c), t in zip(pairs, tests, strict=True)
    ]


def _judge(  # pragma: no mutate block
    b: list[float], c: list[float], th: Thresholds, test: stats.MannWhitney | None, p: float | None, m: int
) -> SpeedComparison:
    n1, n2 = len(b), len(c)
    bm, cm = (stats.median(b) if b else math.nan), (stats.median(c) if c else math.nan)
    ratio = cm / bm if b and c and bm > 0 else math.nan
    if test is None or p is None or stats.min_p_value(n1, n2) * m >= th.alpha:
        family = f" over the {m} judged together (Holm)" if m > 1 else ""
        text = (
            f"insufficient samples: baseline {n1}, candidate {n2}; "
            f"need at least {th.min_samples} each (and enough for p < {th.alpha:g}{family})"
        )
        return SpeedComparison(status=Status.INSUFFICIENT, ratio=ratio, p=None, text=text)
    slower = f"{multiple(ratio)}x slower" if ratio >= 1 else f"{multiple(1 / ratio)}x faster"
    holm = f", Holm-adjusted over {m}: p={p:.2g}" if m > 1 else ""
    figures = f"median {fmt_seconds(bm)} -> {fmt_seconds(cm)} ({slower}), Mann-Whitney p={test.p:.2g}{holm}"
    if p < th.alpha and ratio > th.factor:
        return SpeedComparison(
            status=Status.WORSE, ratio=ratio, p=p, text=f"{figures} < {th.alpha:g} and beyond factor {th.factor:g}"
        )
    if p < th.alpha and ratio < 1 / th.factor:
        return SpeedComparison(
            status=Status.BETTER, ratio=ratio, p=p, text=f"{figures} < {th.alpha:g} and beyond factor {th.factor:g}"
        )
    why = f"p >= {th.alpha:g}" if p >= th.alpha else f"within factor {th.factor:g}"
    return SpeedComparison(status=Status.UNCHANGED, ratio=ratio, p=p, text=f"{figures}: noise ({why})")


def timing_rows(
    category: str, items: list[tuple[str, list[float], list[float]]], th: Thresholds, unit: str = ""
) -> list[Row]:
    """Each (subject, baseline samples, candidate samples) judged by compare_family, as one family."""
    judged = compare_family([(b, c) for _, b, c in items], th)
    return [
        _timing_row(category, subject, b, c, th, cmp, unit) for (subject, b, c), cmp in zip(items, judged, strict=True)
    ]


def _timing_row(
    category: str, subject: str, b: list[float], c: list[float], th: Thresholds, cmp: SpeedComparison, unit: str
) -> Row:
    fails = cmp.status == Status.WORSE or (cmp.status == Status.INSUFFICIENT and th.fail_on_insufficient)
    change = f"{multiple(cmp.ratio)}x" + (f" (p={cmp.p:.2g})" if cmp.p is not None else "")  # pragma: no mutate
    fig = lambda xs: f"{fmt_seconds(stats.median(xs))} (n={len(xs)}{unit})" if xs else "no samples"  # noqa: E731  # pragma: no mutate
    return Row(
        category=category,
        subject=subject,
        status=cmp.status,
        baseline=fig(b),  # pragma: no mutate
        candidate=fig(c),  # pragma: no mutate
        change=change,  # pragma: no mutate
        detail=cmp.text,  # pragma: no mutate
        fails=fails,
    )


def process_samples(records: list[BenchRecord]) -> list[float]:
    """One timing sample per bench process: the median of each record's repetitions.

    Repetitions inside one process share its state (where it was placed, what ran beside it, its
    warm-up) and are not independent samples. Measured: an upgrade to the baseline's own versions
    (both sides the same environment directory, 2 bench processes a side) moved the per-process
    medians of a benchmark by 26% of their median (up to 71%), and the pooled repetitions judged 5
    of 32 timings slower at p < 0.01. So the gate and the report judge processes, not repetitions.
    """
    return [stats.median(xs) for xs in (samples(r) for r in records) if xs]


def speed_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    """Every benchmark both sides timed, judged on one sample per process and as one family (Holm);
    those only one side timed, missing or new."""
    rows: list[Row | int] = []  # an int: the index of a timing in `timed`, judged once all are known
    timed: list[tuple[str, list[float], list[float]]] = []
    b_all, c_all = grouped(base.benches, bench_key), grouped(cand.benches, bench_key)
    b_bench = defaultdict(set)
    c_bench = defaultdict(set)
    for impl, shape, pass_, where in b_all:
        b_bench[(impl, shape, pass_)].add(where)
    for impl, shape, pass_, where in c_all:
        c_bench[(impl, shape, pass_)].add(where)
    for bench in sorted(set(b_bench) | set(c_bench)):
        impl, shape, pass_ = bench
        row = functools.partial(Row, category="speed", subject=f"{impl} {pass_} {shape}")
        bw, cw = b_bench.get(bench, set()), c_bench.get(bench, set())
        for where in sorted(bw & cw):
            b, c = process_samples(b_all[(*bench, where)]), process_samples(c_all[(*bench, where)])
            rows.append(len(timed))
            timed.append((f"{impl} {pass_} {shape} on {where}", b, c))
        if bw and cw and not (bw & cw):
            rows.append(
                row(
                    status=Status.INCOMPARABLE,
                    baseline=", ".join(sorted(bw)),  # pragma: no mutate
                    candidate=", ".join(sorted(cw)),  # pragma: no mutate
                    change="different backends",  # pragma: no mutate
                    detail="timings from different backends or devices are never compared",  # pragma: no mutate
                )
            )
        elif bw and not cw:
            rows.append(
                row(
                    status=Status.MISSING,
                    baseline=", ".join(sorted(bw)),  # pragma: no mutate
                    candidate="not run",  # pragma: no mutate
                    change="not timed by the candidate",  # pragma: no mutate
                    detail="",  # pragma: no mutate
                    fails=th.fail_on_missing,
                )
            )
        elif cw and not bw:
            rows.append(
                row(
                    status=Status.NEW,
                    baseline="not run",  # pragma: no mutate
                    candidate=", ".join(sorted(cw)),  # pragma: no mutate
                    change="not timed by the baseline",  # pragma: no mutate
                )
            )
    judged = timing_rows("speed", timed, th, unit=" processes")
    return [judged[r] if isinstance(r, int) else r for r in rows]
