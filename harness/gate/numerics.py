"""Drift rows: the same case on both sides, its error grown past the limit (harness.gate.drift pairs them)."""

from __future__ import annotations

import functools
from collections import defaultdict

from harness.gate import drift
from harness.gate.rows import Row, Status
from harness.gate.thresholds import Thresholds
from harness.store.derive import (
    case_text,
    repro_command,
)


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
