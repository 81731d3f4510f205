"""What a run's verdict counts, computed once from its records and failure files, for every view to format
(the terminal, `run --json`, JUnit and the report), so that they all say the same numbers.

Three things are counted apart, never added together:
  bugs           one per failure file kept (a root cause: the search shrank it and wrote its replay), per kernel,
                 each the value its failure file holds (harness.store.bug.Bug);
  failing cases  the drawn cases that failed (Hypothesis drew them; the cases a summary row counts);
  shrunk cases   the case each bug was shrunk to: a shrink candidate kept to replay, never another failure.
Oracles' findings are never a kernel's bug or failing case.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.core.summary import KernelSummary
from harness.store import derive
from harness.store.bug import Bug
from harness.store.failures import FailureRecord
from harness.store.read import Records, load
from harness.store.records import CaseRecord

# What each count counts, in the words every view uses.
MEANING = {
    "bugs": "root causes: one per failure file kept, each a shrunk case with its replay",
    "failing_cases": "drawn cases that failed",
    "drawn_cases": "cases drawn and checked",
    "shrunk_cases": "the case each bug was shrunk to (a shrink candidate, not another failure)",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelCounts:
    kernel: str
    drawn: int  # drawn cases checked
    failing: int  # of them, the failing ones
    flaky: int  # of the failing ones, those that passed on replay
    bugs: tuple[Bug, ...]

    @property
    def shrunk(self) -> int:
        return len(self.bugs)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Counts:
    kernels: tuple[KernelCounts, ...]

    @property
    def bugs(self) -> tuple[Bug, ...]:
        return tuple(b for k in self.kernels for b in k.bugs)

    @property
    def drawn(self) -> int:
        return sum(k.drawn for k in self.kernels)

    @property
    def failing(self) -> int:
        return sum(k.failing for k in self.kernels)

    @property
    def flaky(self) -> int:
        return sum(k.flaky for k in self.kernels)

    def of(self, kernel: str) -> KernelCounts:
        """The counts of `kernel` (zeros where it has no records)."""
        found = [k for k in self.kernels if k.kernel == kernel]
        return found[0] if found else KernelCounts(kernel=kernel, drawn=0, failing=0, flaky=0, bugs=())

    def to_json(self) -> dict[str, Any]:
        return {
            "bugs": len(self.bugs),
            "failing_cases": self.failing,
            "drawn_cases": self.drawn,
            "shrunk_cases": len(self.bugs),
            "flaky_cases": self.flaky,
            "meaning": dict(MEANING),
        }


def bug_of(rec: CaseRecord, records: Records) -> Bug:
    """The bug a shrunk record stands for: its failure file's (bug.Bug.of), or, where it has no readable one, the
    record's own result read as one."""
    path, doc = derive.failure_doc(rec, records.roots)
    if doc is not None and not doc.results:  # a file without its results table (`pin`, older writers): the record's
        doc = dataclasses.replace(doc, results=_as_failure(rec).results)
    return Bug.of(doc if doc is not None else _as_failure(rec), path)


def _as_failure(rec: CaseRecord) -> FailureRecord:
    """A shrunk record with no failure file to read, as the failure file of its one result."""
    result = {
        "passed": rec.passed,
        "backend": rec.backend,
        "empty_rows": rec.empty_rows,
        "error": rec.error,
        "comparisons": [c.to_json() for c in rec.comparisons],
        "located": rec.located,
        "interpreter": rec.interpreted_by,
        "replays": [r.to_json() for r in rec.replays or ()],
    }
    case = rec.case if isinstance(rec.case, dict) else {}
    return FailureRecord(
        kernel=rec.implementation, oracles=(), grads=False, case=case, failure=derive.failure_line(rec),
        results={rec.implementation: result},
    )  # fmt: skip


def _summary_rows(records: Records) -> dict[tuple[str, str], KernelSummary]:
    """(run id, kernel) -> the run's own summary row of it, where its run.json has one."""
    rows = {}
    for run_id, run in records.runs.items():
        try:
            for row in KernelSummary.rows_of(run.field("summary")):
                if row.is_kernel:
                    rows[(run_id, row.kernel)] = row
        except ValueError:  # an unreadable summary: the records are counted instead
            continue
    return rows


def count(records: Records) -> Counts:
    """The counts of `records`' kernels (oracles apart). A kernel's drawn and failing cases are its records', or
    its run's summary row's where that says more (a shrunk case the same as a drawn one shares its record file)."""
    rows = _summary_rows(records)
    by_run: dict[tuple[str, str], list[CaseRecord]] = defaultdict(list)
    for rec in records.cases:
        if rec.role != "oracle":
            by_run[(rec.run_id, rec.implementation)].append(rec)
    drawn: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    bugs: dict[str, dict[str, Bug]] = defaultdict(dict)
    for (run_id, kernel), recs in sorted(by_run.items()):
        mine = [r for r in recs if not r.shrunk]
        row = rows.get((run_id, kernel))
        n, failed = len(mine), sum(not r.passed for r in mine)
        if row is not None:  # never fewer than its records show: a failing record is never counted away
            n, failed = max(n, row.examples), max(failed, row.failed)
        drawn[kernel][0] += n
        drawn[kernel][1] += failed
        drawn[kernel][2] += sum(r.flaky for r in mine if not r.passed)
        for rec in sorted((r for r in recs if r.shrunk and not r.passed), key=lambda r: r.time or ""):
            bug = bug_of(rec, records)
            bugs[kernel].setdefault(bug.file or f"{run_id}/{rec.case_id}", bug)  # one bug, one kept file
    for _, kernel in rows:  # a kernel with a summary row and no record (it could not run)
        drawn.setdefault(kernel, [0, 0, 0])
    kernels = tuple(
        KernelCounts(kernel=k, drawn=n, failing=f, flaky=fl, bugs=tuple(bugs[k].values()))
        for k, (n, f, fl) in sorted(drawn.items())
    )
    return Counts(kernels=kernels)


def run_records(path: Path, run_ids: set[str] | None = None) -> Records:
    """A run's records: its own directory, or (a `run --jobs` run, `run_ids` its workers') a shared store's."""
    records = load([path])
    return records.subset(run_ids) if run_ids is not None else records


# --- in words: the same phrases in every view ---


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 run', '2 runs'; `words` where the plural is not word + 's'."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def headline(counts: Counts) -> str:
    """The verdict's counts in one phrase: '1 bug; 1 failing case of 4 drawn'."""
    flaky = f" ({counts.flaky} flaky)" if counts.flaky else ""
    cases = f"{plural(counts.failing, 'failing case')}{flaky} of {counts.drawn} drawn"
    return f"{plural(len(counts.bugs), 'bug')}; {cases}"
