"""What a run's verdict counts, computed once from its records and failure files, for every view to format
(the terminal, `run --json`, JUnit and the report), so that they all say the same numbers.

Three things are counted apart, never added together:
  bugs           one per failure file kept (a root cause: the search shrank it and wrote its replay), per kernel;
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
class Bug:
    """One root cause: a kept failure file, with the shrunk case it replays."""

    kernel: str
    case: str  # the shrunk case in words
    case_id: str
    case_json: Any  # the shrunk case (harness.core.case.Case JSON)
    failure: str  # why it fails, one line
    trigger: str | None  # "fails when: ..." where the search reduced it to a trigger
    file: str | None
    replay: str | None
    flaky: bool
    finding: str | None = None  # the written-up finding it is (harness.running.known)
    expected: bool = False  # that finding was expected (run --known)
    inherited_from: str | None = None


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


def _bug(rec: CaseRecord, records: Records) -> Bug:
    path, doc = derive.failure_doc(rec, records.roots)
    found = derive.found(doc)
    return Bug(
        kernel=rec.implementation,
        case=derive.case_text(rec.case),
        case_id=rec.case_id,
        case_json=rec.case,
        failure=derive.failure_line(rec),
        trigger=found.trigger_words,
        file=path,
        replay=derive.repro_command(path),
        flaky=rec.flaky,
        finding=found.finding,
        expected=found.expected,
        inherited_from=found.inherited_from,
    )


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
            bug = _bug(rec, records)
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


def bug_line(bug: Bug, kernel: KernelCounts) -> str:
    """One bug as the verdict names it: kernel, trigger in words, its kernel's failing cases, the replay command."""
    trigger = bug.trigger or "not reduced to a trigger"
    known = f" (known finding {bug.finding}{', expected' if bug.expected else ''})" if bug.finding else ""
    cases = f"{kernel.failing} of {plural(kernel.drawn, 'drawn case')} failed"
    replay = bug.replay or "no failure file"
    return f"{bug.kernel}{known}: {trigger}; {cases}; replay: {replay}"
