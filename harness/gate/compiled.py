"""Compile rows: each AOT compile check, its compiled memory figures, and the compile stages' times."""

from __future__ import annotations

import dataclasses
import functools

from harness.gate import stats
from harness.gate.rows import Row, Status, grouped
from harness.gate.speed import timing_rows
from harness.gate.thresholds import FIELDS, Thresholds, fmt_value
from harness.store.derive import (
    compile_replay,
    failure_line,
)
from harness.store.read import Records, compile_key
from harness.store.records import CompileRecord
from harness.tpu.mosaic import STAGES


def _figure(recs: list[CompileRecord], field: str) -> float | None:
    section, key = FIELDS[field]
    values = sorted(float(v) for r in recs if (v := (getattr(r, section) or {}).get(key)) is not None)
    return stats.median(values) if values else None


def compile_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    """Per compile check (kernel, pass, shape, topology): whether it compiles on each side, and where both
    compile, each compiled-memory figure the thresholds limit."""
    rows = []
    b_all, c_all = grouped(base.compiles, compile_key), grouped(cand.compiles, compile_key)
    for key in sorted(set(b_all) | set(c_all)):
        impl, topology, shape, pass_ = key
        subject = f"{impl} {pass_} {shape} on {topology}"
        b, c = b_all.get(key, []), c_all.get(key, [])
        verdict = _compiles_row(subject, b, c, th)
        if verdict is not None:
            rows.append(verdict)
        else:
            rows += _memory_rows(subject, b, c, th)
    return rows


def _compiles_row(subject: str, b: list[CompileRecord], c: list[CompileRecord], th: Thresholds) -> Row | None:
    """The row of whether it compiles, where a side is missing or fails; None where both compile."""
    row = functools.partial(Row, category="compile", subject=subject)
    b_ok, c_ok = all(r.ok for r in b), all(r.ok for r in c)
    ok = {True: "compiles", False: "fails"}  # pragma: no mutate
    if not c:
        return row(
            status=Status.MISSING,
            baseline=ok[b_ok],  # pragma: no mutate
            candidate="not run",  # pragma: no mutate
            change="not compiled by the candidate",  # pragma: no mutate
            detail="",  # pragma: no mutate
            fails=th.fail_on_missing,
        )
    if not c_ok and (b_ok or not b):
        bad = next(r for r in c if not r.ok)
        detail = f"new compile failure: {failure_line(bad)}; repro: {compile_replay(bad)}"  # pragma: no mutate
        return row(
            status=Status.WORSE,
            baseline=ok[b_ok] if b else "not run",  # pragma: no mutate
            candidate="fails",  # pragma: no mutate
            change="new failure",  # pragma: no mutate
            detail=detail,  # pragma: no mutate
            fails=True,
        )
    if not b:
        return row(
            status=Status.NEW,
            baseline="not run",  # pragma: no mutate
            candidate=ok[c_ok],  # pragma: no mutate
            change="not compiled by the baseline",  # pragma: no mutate
        )
    if not b_ok:
        return row(
            status=Status.BETTER if c_ok else Status.UNCHANGED,
            baseline="fails",  # pragma: no mutate
            candidate=ok[c_ok],  # pragma: no mutate
            change="fixed" if c_ok else "fails in both",  # pragma: no mutate
        )
    return None


def _memory_rows(subject: str, b: list[CompileRecord], c: list[CompileRecord], th: Thresholds) -> list[Row]:
    """One row per compiled-memory figure the thresholds limit, of a check both sides compile."""
    rows = []
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


def compile_time_rows(base: Records, cand: Records, th: Thresholds) -> list[Row]:
    """Trace, lowering and compile seconds of every compile both sides made, per stage: the speed
    rule on their samples (one per fresh process), with its own factor (th.compile_time_factor)."""
    rows = []
    judged = dataclasses.replace(th, factor=th.compile_time_factor)
    b_all, c_all = grouped(base.compiles, compile_key), grouped(cand.compiles, compile_key)
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
            rows += timing_rows("compile time", [(subject, bs, cs)], judged)
    return rows
