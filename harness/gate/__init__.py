"""The upgrade gate: a candidate environment's records against a baseline's. Pure: records in, rows out.

A row is one thing compared (an implementation's cases, one compile check, one compiled
figure, one benchmark) with a status: "worse" fails the gate (a kernel the baseline ran and
the candidate cannot run is "worse": lost); "better", "unchanged" and "new" do not;
"insufficient" (too few timing samples) and "missing" (in the baseline, absent from the
candidate) fail only as harness/gate/gate_thresholds.toml says; "incomparable" (timed on
different backends) and "not compared" (a kernel the interpreter cannot run on either side,
with the reason) never do; "incomplete" (a side's records are unreadable, or one of its runs
did not finish) always does. Each row falls in one `Group` (regressions, improvements, new,
not compared, within noise), which the summary line and the report count alike.
`format_table` prints the rows.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.core.numbers import multiple
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
from harness.store.records import BenchRecord, CaseRecord, CompileRecord
from harness.tpu import mosaic
from harness.tpu.mosaic import STAGES, KernelBody


class Status(enum.StrEnum):
    """How a row moved, most urgent first (the order the table lists them in)."""

    WORSE = "worse"
    INCOMPLETE = "incomplete"
    MISSING = "missing"
    INSUFFICIENT = "insufficient"
    BETTER = "better"
    NEW = "new"
    NOT_COMPARED = "not compared"
    INCOMPARABLE = "incomparable"
    CHANGED = "changed"  # informational: the kernel lowered to other code (fails only with a worse figure)
    UNCHANGED = "unchanged"


STATUSES = tuple(Status)


class Group(enum.StrEnum):
    """What a row means for the verdict, in the order a verdict lists them."""

    REGRESSIONS = "regressions"  # the rows that fail
    IMPROVEMENTS = "improvements"
    NEW = "new"  # measured or runnable only in the candidate
    NOT_COMPARED = "not compared"  # no verdict either way, with the reason
    WITHIN_NOISE = "within noise"  # compared, and no move beyond its limit


GROUPS = tuple(Group)
CATEGORIES = ("correctness", "drift", "compile", "codegen", "compile time", "memory", "speed", "leak", "records")


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

    @property
    def group(self) -> Group:
        if self.fails:
            return Group.REGRESSIONS
        return {
            Status.BETTER: Group.IMPROVEMENTS,
            Status.NEW: Group.NEW,
            Status.UNCHANGED: Group.WITHIN_NOISE,
            # Other kernel code with no figure worse for it: compared, and within every limit.
            Status.CHANGED: Group.WITHIN_NOISE,
        }.get(self.status, Group.NOT_COMPARED)


@dataclasses.dataclass(kw_only=True)
class GateResult:
    baseline: str
    candidate: str
    thresholds: str
    rows: list[Row]
    # Every case run on both sides, compared side by side (harness.gate.drift), largest growth first.
    drift: list[drift.CaseDrift] = dataclasses.field(default_factory=list)
    # Every compile whose Mosaic kernel bodies changed, with both sides' bodies (the report's diffs).
    codegen: list[CodegenChange] = dataclasses.field(default_factory=list)

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

    def groups(self) -> dict[Group, list[Row]]:
        """Every row in its group (GROUPS order; an empty group is there, empty)."""
        out: dict[Group, list[Row]] = {g: [] for g in GROUPS}
        for r in self.rows:
            out[r.group].append(r)
        return out

    def counts(self) -> str:
        """ "1 improvement, 0 new, 2 not compared, 40 within noise": the groups that are not regressions."""
        groups = self.groups()
        n = len(groups[Group.IMPROVEMENTS])
        parts = [f"{n} improvement{'s' if n != 1 else ''}"]
        parts += [f"{len(groups[g])} {g}" for g in (Group.NEW, Group.NOT_COMPARED, Group.WITHIN_NOISE)]
        return ", ".join(parts)

    def summary(self) -> str:
        if not self.rows:
            return "NOTHING COMPARED: neither side has case, bench or compile records"
        if not self.failed:
            return f"GATE PASSED: no regression ({self.counts()})"
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


def _reasons(b: str | None, c: str | None) -> str:
    if b is not None and b == c:
        return f"cannot run on either side: {b}"  # pragma: no mutate
    return "; ".join(f"{side} cannot run it: {why}" for side, why in (("baseline", b), ("candidate", c)) if why)


def cannot_run_row(impl: str, b_ran: bool, c_ran: bool, b_why: str | None, c_why: str | None) -> Row | None:
    """The row of a kernel the interpreter cannot run on a side (run.json cannot_run), None if it ran on both.

    Lost (ran in the baseline, cannot in the candidate) fails; cannot on both sides, or not asked
    on one, is not compared and fails nothing; runnable only in the candidate is new (its cases are
    then judged as any new kernel's, by `correctness_rows`).
    """
    b_cannot, c_cannot = b_why is not None and not b_ran, c_why is not None and not c_ran
    if not (b_cannot or c_cannot):
        return None
    row = functools.partial(
        Row,
        category="correctness",
        subject=impl,
        baseline="ran" if b_ran else "cannot run" if b_why else "not run",  # pragma: no mutate
        candidate="ran" if c_ran else "cannot run" if c_why else "not run",  # pragma: no mutate
        detail=_reasons(b_why, c_why),
    )
    if b_ran and c_cannot:
        return row(status=Status.WORSE, change="lost: cannot run in the candidate", fails=True)  # pragma: no mutate
    if b_cannot and c_ran:
        return row(status=Status.NEW, change="runs only in the candidate")  # pragma: no mutate
    return row(status=Status.NOT_COMPARED, change="ran on neither side")  # pragma: no mutate


def correctness_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    rows = []
    b_all, c_all = _by_subject(base.cases), _by_subject(cand.cases)
    b_cannot, c_cannot = base.cannot_run(), cand.cannot_run()
    for impl in sorted(set(b_all) | set(c_all) | set(b_cannot) | set(c_cannot)):
        b, c = b_all.get(impl, {}), c_all.get(impl, {})
        special = cannot_run_row(impl, bool(b), bool(c), b_cannot.get(impl), c_cannot.get(impl))
        if special is not None and (special.status != Status.NEW or all(_passed(v) for v in c.values())):
            rows.append(special)
            continue
        if special is not None:
            b = {}  # runnable only in the candidate, and failing there: judged below as new failures
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


# --- compile time and code generation ---


def compile_time_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    """Trace, lowering and compile seconds of every compile both sides made, per stage: the speed
    rule on their samples (one per fresh process), with its own factor (th.compile_time_factor)."""
    rows = []
    judged = dataclasses.replace(th, factor=th.compile_time_factor)
    b_all, c_all = _group(base.compiles, compile_key), _group(cand.compiles, compile_key)
    for key in sorted(set(b_all) & set(c_all)):
        impl, topology, shape, pass_ = key
        b, c = b_all[key], c_all[key]
        if not (all(r.ok for r in b) and all(r.ok for r in c)):
            continue  # compile_rows says what failed
        for stage in STAGES:
            bs = [x for r in b for x in (r.samples or {}).get(stage, [])]
            cs = [x for r in c for x in (r.samples or {}).get(stage, [])]
            if not (bs and cs):
                continue  # a side did not time this stage (records from before stages were timed apart)
            subject = f"{impl} {pass_} {shape} on {topology} {stage}"
            # Judged alone, each its own family: measured, 192 stage timings of one environment
            # against itself (5 processes each, at load) gave no false alarm at any factor from 1.1.
            rows += _timing_rows("compile time", [(subject, bs, cs)], judged)
    return rows


def _bodies(recs: list[CompileRecord]) -> list[KernelBody] | None:
    """The kernel bodies one side's records agree on, or None when they recorded none."""
    found = [r.kernels for r in recs if r.kernels]
    return [KernelBody.from_json(k) for k in found[0]] if found else None


def codegen_changes(base: Records, cand: Records) -> list[CodegenChange]:
    """Every compile whose Mosaic kernel bodies differ between the sides (either side lowered once
    is enough: bodies do not depend on the topology, harness.tpu.mosaic)."""
    out = []
    b_all, c_all = _group(base.compiles, compile_key), _group(cand.compiles, compile_key)
    for key in sorted(set(b_all) & set(c_all)):
        b, c = _bodies(b_all[key]), _bodies(c_all[key])
        if b is None or c is None or mosaic.digest(b) == mosaic.digest(c):
            continue
        impl, topology, shape, pass_ = key
        out.append(CodegenChange(subject=f"{impl} {pass_} {shape} on {topology}", before=b, after=c))
    return out


def codegen_rows(changes: list[CodegenChange], base: Records, cand: Records, others: list[Row]) -> list[Row]:
    """One row per compile whose kernels changed: informational, unless a memory or compile-time row
    of the same compile got worse (then the changed code is named as its likely cause, and fails)."""
    rows = []
    changed = {ch.subject: ch for ch in changes}
    b_all, c_all = _group(base.compiles, compile_key), _group(cand.compiles, compile_key)
    for key in sorted(set(b_all) & set(c_all)):
        impl, topology, shape, pass_ = key
        subject = f"{impl} {pass_} {shape} on {topology}"
        b, c = _bodies(b_all[key]), _bodies(c_all[key])
        if b is None or c is None:
            continue
        row = functools.partial(Row, category="codegen", subject=subject)
        fig = lambda bodies: f"{mosaic.digest(bodies)[:12]} ({sum(k.size for k in bodies)} B)"  # noqa: E731  # pragma: no mutate
        if subject not in changed:
            rows.append(row(status=Status.UNCHANGED, baseline=fig(b), candidate=fig(c), change="same kernel bodies"))
            continue
        worse = [r for r in others if r.fails and r.subject.startswith(subject + " ")]
        estimate = _estimate_change(b, c)
        with_it = (
            f"; with it: {', '.join(r.subject[len(subject) + 1 :] for r in worse)} worse" if worse else ""
        )  # pragma: no mutate
        rows.append(
            row(
                status=Status.WORSE if worse else Status.CHANGED,
                baseline=fig(b),  # pragma: no mutate
                candidate=fig(c),  # pragma: no mutate
                change="code generation changed",  # pragma: no mutate
                detail=f"{len(b)} -> {len(c)} kernels{estimate}{with_it}; diff in the report",  # pragma: no mutate
                fails=bool(worse),
            )
        )
    return rows


def _estimate_change(b: list[KernelBody], c: list[KernelBody]) -> str:  # pragma: no mutate block
    """The kernels' own declared cost estimates, summed, where they moved."""

    def total(bodies: list[KernelBody], field: str) -> float:
        return sum(float((k.cost_estimate or {}).get(field) or 0) for k in bodies)

    moved = [
        f"declared {f} {total(b, f):.3g} -> {total(c, f):.3g}"
        for f in ("flops", "transcendentals", "bytes_accessed")
        if total(b, f) != total(c, f)
    ]
    return f"; {', '.join(moved)}" if moved else ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CodegenChange:
    """One compile whose kernel bodies differ: both sides' bodies, for the report's diff."""

    subject: str
    before: list[KernelBody]
    after: list[KernelBody]

    def diff(self) -> str:
        return mosaic.diff(self.before, self.after)


# --- speed ---


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


def _timing_rows(
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
    judged = _timing_rows("speed", timed, th, unit=" processes")
    return [judged[r] if isinstance(r, int) else r for r in rows]


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
        for why in recs.incomplete(cannot_run=False):  # a kernel that cannot run is judged by correctness_rows
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
    rows += compile_time_rows(base, cand, th)
    changes = codegen_changes(base, cand)
    rows += codegen_rows(changes, base, cand, rows)
    rows += drift_rows(pairs, th)
    rows += leak_rows(base, cand)
    if rows:  # with nothing compared the gate is "NOTHING COMPARED" (bad input), never PASS either way
        rows += incomplete_rows(base, cand)
    order = {s: i for i, s in enumerate(STATUSES)}
    rows.sort(key=lambda r: (not r.fails, order[r.status], CATEGORIES.index(r.category), r.subject))
    return GateResult(
        baseline=labels[0], candidate=labels[1], thresholds=th.source, rows=rows, drift=pairs, codegen=changes
    )


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
            if r.detail and (r.fails or verbose or r.group == Group.NOT_COMPARED):
                lines.append(f"{'':<12} -> {r.detail}")
    unchanged = defaultdict(int)
    for r in result.rows:
        if r.status == Status.UNCHANGED:
            unchanged[r.category] += 1
    if unchanged and not verbose:
        lines.append("unchanged: " + ", ".join(f"{c} {unchanged[c]}" for c in CATEGORIES if unchanged[c]))
    lines.append(result.summary())
    return "\n".join(lines)
