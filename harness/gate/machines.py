"""Timings from two machines: never compared.

The speed and compile-time rules compare samples taken on one machine, the two sides' rounds
alternating, so that whatever else the machine did falls on both sides. Sides run as separate jobs
(`upgrade --side`) may run on different machines; their timing rows then say so instead of gating.
Correctness, drift, compile, memory and codegen rows do not depend on the machine and still gate.
"""

from __future__ import annotations

import dataclasses

from harness.gate.rows import Row, Status
from harness.store.read import Records

TIMED = ("speed", "compile time")
# The statuses of a timing compared (or too thinly sampled to be): those are what two machines cannot say.
JUDGED = (Status.WORSE, Status.BETTER, Status.UNCHANGED, Status.INSUFFICIENT)
CHANGE = "not compared: different machines"


def hosts(recs: Records) -> set[str]:
    """The hosts the side's runs name (run.json "machine"); empty for records that name none."""
    return {str(h) for run in recs.runs.values() if (h := (run.machine or {}).get("host"))}


def different(base: Records, cand: Records) -> tuple[set[str], set[str]] | None:
    """Each side's hosts where both name some and they differ; None where the timings are comparable."""
    b, c = hosts(base), hosts(cand)
    return (b, c) if b and c and b != c else None


def timing_rows_across(rows: list[Row], base: Records, cand: Records) -> list[Row]:
    """`rows` with each judged timing row not compared when the sides ran on different machines."""
    apart = different(base, cand)
    if apart is None:
        return rows
    named = lambda hs: ", ".join(sorted(hs))  # noqa: E731
    detail = (
        f"the baseline was timed on {named(apart[0])} and the candidate on {named(apart[1])}: timings from two "
        "machines are never compared; run both sides in one job (`harness upgrade` without --side) to gate them"
    )
    return [
        dataclasses.replace(r, status=Status.NOT_COMPARED, change=CHANGE, detail=detail, fails=False)
        if r.category in TIMED and r.status in JUDGED
        else r
        for r in rows
    ]
