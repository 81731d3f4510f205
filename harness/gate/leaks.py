"""Leak and records rows: memory that grows per call, and a side whose records are unreadable or unfinished."""

from __future__ import annotations

import functools

from harness.gate.rows import Row, Status, grouped
from harness.store.derive import (
    leak_command,
)
from harness.store.read import Records


def leak_rows(base: Records, cand: Records) -> list[Row]:
    """A candidate whose kernel's memory grows with calls fails, whatever the baseline did."""
    rows = []
    b_all = grouped(base.leaks, lambda r: (str(r.implementation), str(r.variant)))
    c_all = grouped(cand.leaks, lambda r: (str(r.implementation), str(r.variant)))
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
