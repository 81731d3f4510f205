"""The upgrade gate: a candidate environment's records against a baseline's. Pure: records in, rows out.

A row is one thing compared (an implementation's cases, one compile check, one compiled
figure, one benchmark) with a status: "worse" fails the gate; "better", "unchanged" and
"new" do not; "insufficient" (too few timing samples) and "missing" (in the baseline,
absent from the candidate) fail only as harness/gate/gate_thresholds.toml says; "incomparable"
(timed on different backends) never does; "incomplete" (a side's records are unreadable, or
one of its runs did not finish) always does. `format_table` prints the rows.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.gate import drift, stats
from harness.gate.thresholds import FIELDS, Thresholds, fmt_value
from harness.store.derive import (
    case_size,
    case_text,
    compile_replay,
    failure_file,
    failure_line,
    leak_command,
    repro_command,
)
from harness.store.read import Records, bench_key, compile_key, samples
from harness.store.records import CaseRecord, CompileRecord


class Status(enum.StrEnum):
    """How a row moved, most urgent first (the order the table lists them in)."""

    WORSE = "worse"
    INCOMPLETE = "incomplete"
    MISSING = "missing"
    INSUFFICIENT = "insufficient"
    BETTER = "better"
    NEW = "new"
    INCOMPARABLE = "incomparable"
    UNCHANGED = "unchanged"


STATUSES = tuple(Status)
CATEGORIES = ("correctness", "drift", "compile", "memory", "speed", "leak", "records")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    category: str  # one of CATEGORIES
    subject: str  # what was compared
    status: Status
    baseline: str  # the baseline's figure
    candidate: str  # the candidate's figure
    change: str  # the movement, in words and numbers
    detail: str = ""  # why, with the limit it was held to; for a failure, its case and repro command
    fails: bool = False


@dataclasses.dataclass(kw_only=True)
class GateResult:
    baseline: str
    candidate: str
    thresholds: str
    rows: list[Row]
    # Every case run on both sides, compared side by side (harness.gate.drift), largest growth first.
    drift: list[drift.CaseDrift] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.fails for r in self.rows)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.fails]

    def largest_drifts(self, n: int = 20) -> list[drift.CaseDrift]:
        """The `n` paired cases whose error grew most (for the report's drift section)."""
        return drift.largest(self.drift, n)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    def summary(self) -> str:
        if not self.rows:
            return "NOTHING COMPARED: neither side has case, bench or compile records"
        if not self.failed:
            return f"GATE PASSED: no regression ({self.count('better')} better, {self.count('unchanged')} unchanged)"
        by_cat = defaultdict(int)
        for r in self.failures:
            by_cat[r.category] += 1
        parts = ", ".join(f"{c} {by_cat[c]}" for c in CATEGORIES if by_cat[c])
        n = len(self.failures)
        return f"GATE FAILED: {n} regression{'s' if n != 1 else ''} ({parts})"


def fmt_seconds(s: float) -> str:  # pragma: no mutate block
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


# --- correctness ---


def _by_subject(cases: list[CaseRecord]) -> dict[str, dict[str, list[CaseRecord]]]:
    out: dict[str, dict[str, list[CaseRecord]]] = defaultdict(lambda: defaultdict(list))
    for rec in cases:
        out[rec.implementation][rec.case_id].append(rec)
    return out


def _passed(recs: list[CaseRecord]) -> bool:
    return all(r.passed for r in recs)


def _example(recs: list[CaseRecord], roots: list[Path]) -> str:
    """The failure a person should look at first: a shrunk one with a repro file, else the smallest case."""
    rec = min(recs, key=lambda r: (not r.shrunk, not r.failure_file, case_size(r)))
    text = f"{case_text(rec.case)}: {failure_line(rec)}"
    cmd = repro_command(failure_file(rec, roots))
    return text + (f"; repro: {cmd}" if cmd else "; no repro file recorded")  # pragma: no mutate


def correctness_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    rows = []
    b_all, c_all = _by_subject(base.cases), _by_subject(cand.cases)
    for impl in sorted(set(b_all) | set(c_all)):
        b, c = b_all.get(impl, {}), c_all.get(impl, {})
        b_fail = sum(not _passed(v) for v in b.values())
        c_fail = sum(not _passed(v) for v in c.values())
        b_fig = f"{len(b)} cases, {b_fail} failing" if b else "not run"  # pragma: no mutate
        c_fig = f"{len(c)} cases, {c_fail} failing" if c else "not run"  # pragma: no mutate
        row = functools.partial(
            Row,
            category="correctness",
            subject=impl,
            baseline=b_fig,  # pragma: no mutate
            candidate=c_fig,  # pragma: no mutate
        )
        if not c:
            rows.append(
                row(
                    status=Status.MISSING,
                    change="not run by the candidate",  # pragma: no mutate
                    detail="the baseline ran it; the candidate has no case records",  # pragma: no mutate
                    fails=th.fail_on_missing,
                )
            )
            continue
        # New: failing in the candidate, and passing in the baseline or never run there
        # (a shrunk failure is a new, smaller case, so it has no baseline counterpart).
        new = [cid for cid, recs in c.items() if not _passed(recs) and _passed(b.get(cid, []))]
        fixed = [cid for cid, recs in b.items() if not _passed(recs) and cid in c and _passed(c[cid])]
        if new:
            failing = [r for cid in new for r in c[cid] if not r.passed]
            # A run reports each distinct failure with a failure file of its own: all are listed.
            distinct = list({r.failure_file: r for r in failing if r.failure_file}.values())
            example = _example(failing, cand.roots)
            change, detail = f"+{len(new)} new failing", f"new failure: {example}"  # pragma: no mutate
            if len(distinct) > 1:
                change += f" ({len(distinct)} distinct failures)"  # pragma: no mutate
                detail = "new failures: " + " | ".join(_example([r], cand.roots) for r in distinct)  # pragma: no mutate
            rows.append(row(status=Status.WORSE, change=change, detail=detail, fails=True))
        elif fixed:
            rows.append(
                row(
                    status=Status.BETTER,
                    change=f"{len(fixed)} fixed",  # pragma: no mutate
                )
            )
        elif not b:
            rows.append(
                row(
                    status=Status.NEW,
                    change="not run by the baseline",  # pragma: no mutate
                )
            )
        else:
            still = f"; {c_fail} failing in both" if c_fail else ""  # pragma: no mutate
            rows.append(
                row(
                    status=Status.UNCHANGED,
                    change="no new failure" + still,  # pragma: no mutate
                )
            )
    return rows


# --- paired numerics drift ---


def drift_rows(pairs: list[drift.CaseDrift], th: Thresholds) -> list[Row]:
    """One row per implementation with paired cases: worse when any pair's error grew beyond the drift factor."""
    rows = []
    by_impl: dict[str, list[drift.CaseDrift]] = defaultdict(list)
    for d in pairs:
        by_impl[d.implementation].append(d)
    for impl, ds in sorted(by_impl.items()):
        same = sum(d.identical for d in ds)
        subject = f"{impl} paired cases"
        fig = f"{len(ds)} cases"  # pragma: no mutate
        cand = f"{same} bit-identical"  # pragma: no mutate
        row = functools.partial(
            Row,
            category="drift",
            subject=subject,
            baseline=fig,  # pragma: no mutate
            candidate=cand,  # pragma: no mutate
        )
        beyond = [d for d in ds if d.beyond(th.drift_factor, th.drift_min_used)]
        finite = [d.growth for d in ds if not d.identical and d.growth == d.growth]
        largest = f"largest error growth x{max(finite):.2f}" if finite else "no error moved"  # pragma: no mutate
        if not beyond:
            detail = f"{largest}; limit x{th.drift_factor:g}"  # pragma: no mutate
            rows.append(
                row(
                    status=Status.UNCHANGED,
                    change=f"{len(ds) - same} moved, within limit",  # pragma: no mutate
                    detail=detail,  # pragma: no mutate
                )
            )
            continue
        worst = max(beyond, key=lambda d: d.growth)
        replay = f"; replay: {repro_command(worst.replay)}" if worst.replay else ""  # pragma: no mutate
        detail = (  # pragma: no mutate
            f"{len(beyond)} case{'s' if len(beyond) != 1 else ''} beyond x{th.drift_factor:g} "  # pragma: no mutate
            f"(even where both sides pass); worst {case_text(worst.case)}: "  # pragma: no mutate
            + "; ".join(q.text() for q in worst.beyond(th.drift_factor, th.drift_min_used))  # pragma: no mutate
            + replay  # pragma: no mutate
        )
        rows.append(
            row(
                status=Status.WORSE,
                change=f"{len(beyond)} drifted",  # pragma: no mutate
                detail=detail,  # pragma: no mutate
                fails=True,
            )
        )
    return rows


# --- compile and compiled memory ---


def _group(recs: list[Any], key: Any) -> dict[tuple[str, ...], list[Any]]:
    out: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    for r in recs:
        out[key(r)].append(r)
    return out


def _figure(recs: list[CompileRecord], field: str) -> float | None:
    section, key = FIELDS[field]
    values = sorted(float(v) for r in recs if (v := (getattr(r, section) or {}).get(key)) is not None)
    return stats.median(values) if values else None


def compile_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    rows = []
    b_all, c_all = _group(base.compiles, compile_key), _group(cand.compiles, compile_key)
    for key in sorted(set(b_all) | set(c_all)):
        impl, topology, shape, pass_ = key
        subject = f"{impl} {pass_} {shape} on {topology}"
        row = functools.partial(Row, category="compile", subject=subject)
        b, c = b_all.get(key, []), c_all.get(key, [])
        b_ok, c_ok = all(r.ok for r in b), all(r.ok for r in c)
        ok = {True: "compiles", False: "fails"}  # pragma: no mutate
        if not c:
            rows.append(
                row(
                    status=Status.MISSING,
                    baseline=ok[b_ok],  # pragma: no mutate
                    candidate="not run",  # pragma: no mutate
                    change="not compiled by the candidate",  # pragma: no mutate
                    detail="",  # pragma: no mutate
                    fails=th.fail_on_missing,
                )
            )
            continue
        if not c_ok and (b_ok or not b):
            bad = next(r for r in c if not r.ok)
            detail = f"new compile failure: {failure_line(bad)}; repro: {compile_replay(bad)}"  # pragma: no mutate
            rows.append(
                row(
                    status=Status.WORSE,
                    baseline=ok[b_ok] if b else "not run",  # pragma: no mutate
                    candidate="fails",  # pragma: no mutate
                    change="new failure",  # pragma: no mutate
                    detail=detail,  # pragma: no mutate
                    fails=True,
                )
            )
            continue
        if not b:
            rows.append(
                row(
                    status=Status.NEW,
                    baseline="not run",  # pragma: no mutate
                    candidate=ok[c_ok],  # pragma: no mutate
                    change="not compiled by the baseline",  # pragma: no mutate
                )
            )
            continue
        if not b_ok:
            rows.append(
                row(
                    status=Status.BETTER if c_ok else Status.UNCHANGED,
                    baseline="fails",  # pragma: no mutate
                    candidate=ok[c_ok],  # pragma: no mutate
                    change="fixed" if c_ok else "fails in both",  # pragma: no mutate
                )
            )
            continue
        for limit in th.limits:
            bv, cv = _figure(b, limit.field), _figure(c, limit.field)
            if bv is None or cv is None:
                continue
            out = limit.check(bv, cv)
            change = f"{out.change:+.1%}" if out.change != float("inf") else "from 0"  # pragma: no mutate
            rows.append(
                Row(
                    category="memory",
                    subject=f"{subject} {limit.field}",
                    status=out.status,
                    baseline=fmt_value(limit.field, bv),  # pragma: no mutate
                    candidate=fmt_value(limit.field, cv),  # pragma: no mutate
                    change=change,  # pragma: no mutate
                    detail=out.message,  # pragma: no mutate
                    fails=out.status == Status.WORSE,
                )
            )
    return rows


# --- speed ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpeedComparison:
    """Two sets of timing samples, judged. status: worse, better, unchanged or insufficient."""

    status: str
    ratio: float  # candidate median / baseline median
    p: float | None
    text: str


def compare_samples(b: list[float], c: list[float], th: Thresholds) -> SpeedComparison:
    """Mann-Whitney U on the samples, then the factor on the medians; never on too few samples."""
    n1, n2 = len(b), len(c)
    bm, cm = (stats.median(b) if b else math.nan), (stats.median(c) if c else math.nan)
    ratio = cm / bm if b and c and bm > 0 else math.nan
    if min(n1, n2) < th.min_samples or stats.min_p_value(n1, n2) >= th.alpha:
        text = (  # pragma: no mutate
            f"insufficient samples: baseline {n1}, candidate {n2}; "  # pragma: no mutate
            f"need at least {th.min_samples} each (and enough for p < {th.alpha:g})"  # pragma: no mutate
        )
        return SpeedComparison(status=Status.INSUFFICIENT, ratio=ratio, p=None, text=text)
    test = stats.mann_whitney_u(b, c)
    slower = f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"  # pragma: no mutate
    figures = (  # pragma: no mutate
        f"median {fmt_seconds(bm)} -> {fmt_seconds(cm)} ({slower}), Mann-Whitney p={test.p:.2g}"  # pragma: no mutate
    )
    if test.p < th.alpha and ratio > th.factor:
        return SpeedComparison(
            status=Status.WORSE,
            ratio=ratio,
            p=test.p,
            text=f"{figures} < {th.alpha:g} and beyond factor {th.factor:g}",  # pragma: no mutate
        )
    if test.p < th.alpha and ratio < 1 / th.factor:
        return SpeedComparison(
            status=Status.BETTER,
            ratio=ratio,
            p=test.p,
            text=f"{figures} < {th.alpha:g} and beyond factor {th.factor:g}",  # pragma: no mutate
        )
    why = f"p >= {th.alpha:g}" if test.p >= th.alpha else f"within factor {th.factor:g}"  # pragma: no mutate
    return SpeedComparison(
        status=Status.UNCHANGED,
        ratio=ratio,
        p=test.p,
        text=f"{figures}: noise ({why})",  # pragma: no mutate
    )


def speed_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    rows = []
    b_all, c_all = _group(base.benches, bench_key), _group(cand.benches, bench_key)
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
            b = [x for r in b_all[(*bench, where)] for x in samples(r)]
            c = [x for r in c_all[(*bench, where)] for x in samples(r)]
            cmp = compare_samples(b, c, th)
            fails = cmp.status == Status.WORSE or (cmp.status == Status.INSUFFICIENT and th.fail_on_insufficient)
            change = f"{cmp.ratio:.2f}x" + (f" (p={cmp.p:.2g})" if cmp.p is not None else "")  # pragma: no mutate
            fig = lambda xs: f"{fmt_seconds(stats.median(xs))} (n={len(xs)})" if xs else "no samples"  # noqa: E731  # pragma: no mutate
            rows.append(
                row(
                    subject=f"{impl} {pass_} {shape} on {where}",
                    status=cmp.status,
                    baseline=fig(b),  # pragma: no mutate
                    candidate=fig(c),  # pragma: no mutate
                    change=change,  # pragma: no mutate
                    detail=cmp.text,  # pragma: no mutate
                    fails=fails,
                )
            )
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
    return rows


# --- leaks and incomplete data ---


def leak_rows(base: Records, cand: Records) -> list[Row]:
    """A candidate whose kernel's memory grows with calls fails, whatever the baseline did."""
    rows = []
    b_all = _group(base.leaks, lambda r: (str(r.implementation), str(r.variant)))
    c_all = _group(cand.leaks, lambda r: (str(r.implementation), str(r.variant)))
    for key in sorted(c_all):
        impl, variant = key
        b, c = b_all.get(key, []), c_all[key]
        b_leaks = not all(r.passed for r in b)  # all() of no records is True: a baseline that never ran did not leak
        b_fig = ("leaks" if b_leaks else "flat") if b else "not run"  # pragma: no mutate
        row = functools.partial(
            Row,
            category="leak",
            subject=f"{impl} {variant}",
            baseline=b_fig,  # pragma: no mutate
        )
        bad = [r for r in c if not r.passed]
        if bad:
            grows = "; ".join(str(g) for g in bad[0].growing or []) or str(bad[0].error)  # pragma: no mutate
            detail = f"memory grows with calls: {grows}; repro: {leak_command(impl)}"  # pragma: no mutate
            rows.append(
                row(
                    status=Status.WORSE,
                    candidate="leaks",  # pragma: no mutate
                    change="grows per call",  # pragma: no mutate
                    detail=detail,  # pragma: no mutate
                    fails=True,
                )
            )
        elif b_leaks:
            rows.append(
                row(
                    status=Status.BETTER,
                    candidate="flat",  # pragma: no mutate
                    change="leak fixed",  # pragma: no mutate
                )
            )
        else:
            rows.append(
                row(
                    status=Status.UNCHANGED if b else Status.NEW,
                    candidate="flat",  # pragma: no mutate
                    change="no growth",  # pragma: no mutate
                )
            )
    return rows


def incomplete_rows(base: Records, cand: Records) -> list[Row]:
    """A side whose records are not the whole of its runs is never a pass (harness.store.read)."""
    rows = []
    for side, recs in (("baseline", base), ("candidate", cand)):
        for why in recs.incomplete():
            rows.append(
                Row(
                    category="records",
                    subject=side,
                    status=Status.INCOMPLETE,
                    baseline="",  # pragma: no mutate
                    candidate="",  # pragma: no mutate
                    change="incomplete data",  # pragma: no mutate
                    detail=why,  # pragma: no mutate
                    fails=True,
                )
            )
    return rows


def compare(
    base: Records, cand: Records, th: Thresholds, *, labels: tuple[str, str] = ("baseline", "candidate")
) -> GateResult:
    pairs = drift.with_replays(drift.pair(base.cases, cand.cases), [*cand.roots, *base.roots])
    rows = correctness_rows(base, cand, th) + compile_rows(base, cand, th) + speed_rows(base, cand, th)
    rows += drift_rows(pairs, th)
    rows += leak_rows(base, cand)
    if rows:  # with nothing compared the gate is "NOTHING COMPARED" (bad input), never PASS either way
        rows += incomplete_rows(base, cand)
    order = {s: i for i, s in enumerate(STATUSES)}
    rows.sort(key=lambda r: (not r.fails, order[r.status], CATEGORIES.index(r.category), r.subject))
    return GateResult(baseline=labels[0], candidate=labels[1], thresholds=th.source, rows=rows, drift=pairs)


# --- formatting ---


def format_table(result: GateResult, *, verbose: bool = False) -> str:  # pragma: no mutate block
    """The compact table: every row that is not unchanged (all with verbose), then a count of the rest."""
    shown = [r for r in result.rows if verbose or r.status != Status.UNCHANGED]
    lines = [f"gate: baseline {result.baseline}  vs  candidate {result.candidate}  (thresholds: {result.thresholds})"]
    if shown:
        w = max(len(r.subject) for r in shown)
        w = min(max(w, 7), 72)
        head = f"{'category':<12} {'status':<12} {'subject':<{w}} {'baseline':>22} {'candidate':>22}  change"
        lines += [head, "-" * len(head)]
        for r in shown:
            status = r.status.upper() if r.fails else r.status
            subject = r.subject if len(r.subject) <= w else r.subject[: w - 3] + "..."
            lines.append(f"{r.category:<12} {status:<12} {subject:<{w}} {r.baseline:>22} {r.candidate:>22}  {r.change}")
            if r.detail and (r.fails or verbose or r.status in (Status.INSUFFICIENT, Status.INCOMPARABLE)):
                lines.append(f"{'':<12} -> {r.detail}")
    unchanged = defaultdict(int)
    for r in result.rows:
        if r.status == Status.UNCHANGED:
            unchanged[r.category] += 1
    if unchanged and not verbose:
        lines.append("unchanged: " + ", ".join(f"{c} {unchanged[c]}" for c in CATEGORIES if unchanged[c]))
    lines.append(result.summary())
    return "\n".join(lines)
