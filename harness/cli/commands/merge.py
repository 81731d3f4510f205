"""`merge`: merge results stores from several machines (CI matrix jobs) into one.

With --expect-cells SESSION each source is one CI cell's artifact of that nox session's cells
(harness.environments.matrix.SESSIONS): a directory named ARTIFACT_PREFIX + the cell's name holding the cell's
store and JOB_STATUS_FILE, the cell job's status as its workflow wrote it (.github/workflows/cells.yml). Every
cell whose artifact is missing, whose job did not succeed or whose store holds no records is named, and the
merge exits 1 (after merging what there is: the report shows every cell that ran).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.environments.matrix import SESSIONS
from harness.store.files import MergeReport, merge_stores

NAME = "merge"
HELP = "copy the records and failure files of several results stores into one, without overwriting"
# A cell's artifact is `store-<cell name>` (cells.yml uploads it so; download-artifact names its directory so).
ARTIFACT_PREFIX = "store-"
# In a cell's artifact: one word, GitHub's `job.status` when the job's last step ran (success, failure, cancelled).
JOB_STATUS_FILE = "job-status"
SUCCESS = "success"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellOutcome:
    """What one expected cell left: its artifact (None: none arrived), its job's status, whether it holds records."""

    name: str
    source: Path | None
    job: str | None  # None: the artifact holds no JOB_STATUS_FILE
    has_records: bool

    @property
    def problem(self) -> str | None:
        """Why the cell counts as not run, in words; None when it ran."""
        if self.source is None:
            return "could not run: no store arrived (its job failed before uploading one, or never started)"
        if self.job != SUCCESS:
            status = "no job status recorded" if self.job is None else f"job status {self.job!r}"
            kept = "its records are merged" if self.has_records else "it recorded nothing"
            return f"could not run to the end: its job failed ({status}); {kept}"
        if not self.has_records:
            return f"could not run: its store {self.source} holds no records"
        return None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="*", type=Path, metavar="STORE", help="stores to merge from")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="store to merge into (created if missing)")
    p.add_argument(
        "--expect-cells",
        choices=list(SESSIONS),
        metavar="SESSION",
        help=f"the sources are the CI artifacts ({ARTIFACT_PREFIX}<cell>) of this nox session's cells "
        f"({', '.join(SESSIONS)}): exit 1 naming each cell that did not run",
    )


def cell_outcomes(expected: Sequence[str], sources: Sequence[Path]) -> list[CellOutcome]:
    """Each expected cell's outcome, in `expected`'s order; UsageError for a source that is no expected cell's."""
    names = {f"{ARTIFACT_PREFIX}{name}": name for name in expected}
    unknown = sorted(str(s) for s in sources if s.name not in names)
    if unknown:
        raise UsageError(
            f"{unknown[0]} is not the artifact of a cell: give only {ARTIFACT_PREFIX}<cell> directories of the "
            f"session's cells ({', '.join(expected)}), or the session they come from as --expect-cells"
        )
    by_name = {names[s.name]: s for s in sources}
    return [_outcome(name, by_name.get(name)) for name in expected]


def _outcome(name: str, source: Path | None) -> CellOutcome:
    if source is None or not source.is_dir():
        return CellOutcome(name=name, source=None, job=None, has_records=False)
    status = source / JOB_STATUS_FILE
    job = status.read_text().strip() if status.is_file() else None
    return CellOutcome(name=name, source=source, job=job, has_records=(source / "records").is_dir())


def main(args: argparse.Namespace) -> int:
    sources: list[Path] = list(args.sources)
    outcomes: list[CellOutcome] = []
    if args.expect_cells is not None:
        outcomes = cell_outcomes([c.name for c in SESSIONS[args.expect_cells]], sources)
        sources = [o.source for o in outcomes if o.has_records and o.source is not None]
    elif not sources:
        raise UsageError("no STORE to merge: give one or more stores (or --expect-cells SESSION with its artifacts)")
    report = merge_stores(sources, args.out) if sources else MergeReport()
    print(f"merged into {args.out}: {report.copied} copied, {report.identical} already present")
    for path in report.kept_both:
        print(f"  {path}")
    for path in report.conflicts:
        print(f"  conflict: {path}")
    failed = [o for o in outcomes if o.problem is not None]
    if outcomes:
        print(f"cells of {args.expect_cells}: {len(outcomes) - len(failed)} of {len(outcomes)} ran")
    for o in failed:
        print(f"  cell {o.name} {o.problem}")
    return EXIT_FAIL if report.conflicts or failed else EXIT_OK
