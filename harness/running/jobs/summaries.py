"""The summary rows of a `run --jobs`'s workers merged into one row per kernel (and oracle)."""

from __future__ import annotations

import dataclasses

from harness.core.summary import KernelSummary
from harness.store.records import RunRecord
from harness.store.schema import KernelStatus

# The most serious first: a merged row takes the most serious of its shards' statuses.
_MERGED_STATUS = (
    KernelStatus.INTERRUPTED,
    KernelStatus.FAIL,
    KernelStatus.FLAKY_FAIL,
    KernelStatus.KNOWN_FAIL,
    KernelStatus.ORACLE_FINDING,
    KernelStatus.INTERPRETER_DIVERGENCE,
    KernelStatus.CANNOT_RUN,
    KernelStatus.PASS,
)


def merge_rows(runs: list[RunRecord]) -> list[KernelSummary]:
    """One summary row per kernel (and oracle) over every worker's rows: counts summed,
    the worst error kept, seconds the longest worker's, status the most serious."""
    merged: dict[str, KernelSummary] = {}
    for run in runs:
        for row in run.summary:
            into = merged.get(row.kernel)
            if into is None:
                merged[row.kernel] = row
                continue
            worsts = [w for w in (into.worst, row.worst) if w is not None]
            statuses = [into.status, row.status]
            merged[row.kernel] = dataclasses.replace(
                into,
                examples=into.examples + row.examples,
                failed=into.failed + row.failed,
                seconds=max(into.seconds, row.seconds),
                worst=max(worsts, default=None),
                status=min(statuses, key=lambda s: _MERGED_STATUS.index(s) if s in _MERGED_STATUS else -1),
            )
    return list(merged.values())
