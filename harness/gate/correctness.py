"""Correctness rows: each implementation's verdict on its cases, and a kernel that can run on one side only."""

from __future__ import annotations

import functools
from collections import defaultdict
from pathlib import Path

from harness.gate.rows import Row, Status
from harness.gate.thresholds import Thresholds
from harness.store.derive import (
    case_size,
    case_text,
    failure_file,
    failure_line,
    repro_command,
)
from harness.store.read import Records
from harness.store.records import CaseRecord


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
    """Per implementation: a kernel that can run on one side only, else its cases on both sides compared."""
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
        rows.append(_cases_row(impl, b, c, cand.roots, th))
    return rows


def _cases_row(
    impl: str, b: dict[str, list[CaseRecord]], c: dict[str, list[CaseRecord]], roots: list[Path], th: Thresholds
) -> Row:
    """One implementation's cases on both sides (case id -> its records): new failures, fixed ones, or neither."""
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
        return row(
            status=Status.MISSING,
            change="not run by the candidate",  # pragma: no mutate
            detail="the baseline ran it; the candidate has no case records",  # pragma: no mutate
            fails=th.fail_on_missing,
        )
    # New: failing in the candidate, and passing in the baseline or never run there
    # (a shrunk failure is a new, smaller case, so it has no baseline counterpart).
    new = [cid for cid, recs in c.items() if not _passed(recs) and _passed(b.get(cid, []))]
    fixed = [cid for cid, recs in b.items() if not _passed(recs) and cid in c and _passed(c[cid])]
    if new:
        failing = [r for cid in new for r in c[cid] if not r.passed]
        # A run reports each distinct failure with a failure file of its own: all are listed.
        distinct = list({r.failure_file: r for r in failing if r.failure_file}.values())
        change, detail = f"+{len(new)} new failing", f"new failure: {_example(failing, roots)}"  # pragma: no mutate
        if len(distinct) > 1:
            change += f" ({len(distinct)} distinct failures)"  # pragma: no mutate
            detail = "new failures: " + " | ".join(_example([r], roots) for r in distinct)  # pragma: no mutate
        return row(status=Status.WORSE, change=change, detail=detail, fails=True)
    if fixed:
        return row(
            status=Status.BETTER,
            change=f"{len(fixed)} fixed",  # pragma: no mutate
        )
    if not b:
        return row(
            status=Status.NEW,
            change="not run by the baseline",  # pragma: no mutate
        )
    still = f"; {c_fail} failing in both" if c_fail else ""  # pragma: no mutate
    return row(
        status=Status.UNCHANGED,
        change="no new failure" + still,  # pragma: no mutate
    )
