"""What the workers of one `run --jobs` wrote into its store: their run.json files and their case records."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from harness.core.case import Case
from harness.running.jobs.shard import Shard
from harness.store import records
from harness.store.files import atomic_write_json
from harness.store.records import CaseRecord, RunRecord
from harness.store.schema import RecordError, RunStatus

T = TypeVar("T")


def read(path: Path, parse: Callable[[Any, str], T]) -> T | None:
    """The typed record in `path`; None where it cannot be read (a worker killed mid-write, another kind)."""
    try:
        return parse(json.loads(path.read_text()), str(path))
    except (OSError, ValueError, RecordError):
        return None


def shard_index(run: RunRecord) -> int:
    return Shard.parse(run.shard or "0/1").index


def worker_runs(store: Path, token: str) -> list[RunRecord]:
    """The run.json of every worker of the `run --jobs` with this token, by shard."""
    runs = [read(path, RunRecord.from_json) for path in sorted(store.glob("records/*/run.json"))]
    return sorted((r for r in runs if r is not None and r.jobs_parent == token), key=shard_index)


def case_records(store: Path, run_id: str) -> Iterator[tuple[Path, CaseRecord]]:
    """Every case record of one run directory that reads, with its path."""
    for path in sorted((store / "records" / run_id).glob("*.json")):
        if path.name == "run.json":
            continue
        rec = read(path, records.from_json)
        if isinstance(rec, CaseRecord):
            yield path, rec


def worker_cases(store: Path, run_ids: set[str], kernel: str) -> list[Case]:
    """The cases the workers checked for `kernel`, in the order they finished (shrink results left out)."""
    found = [
        (rec.time or "", Case.from_json(rec.case))
        for run_id in sorted(run_ids)
        for _, rec in case_records(store, run_id)
        if rec.implementation == kernel and not rec.shrunk and rec.case is not None
    ]
    return [case for _, case in sorted(found, key=lambda tc: tc[0])]


def mark_unfinished(store: Path, token: str, codes: list[int], *, interrupted: bool) -> None:
    """A worker's run.json still "running" after it ended (killed before it could write more)
    ends "interrupted" after a stop, else "failed" with how the worker ended."""
    for path in store.glob("records/*/run.json"):
        run = read(path, RunRecord.from_json)
        if run is None or run.jobs_parent != token or run.status != RunStatus.RUNNING:
            continue
        index = shard_index(run)
        code = codes[index] if index < len(codes) else None
        if interrupted:
            run = dataclasses.replace(run, status=RunStatus.INTERRUPTED)
        else:
            error = f"the worker process ended with exit status {code}"
            run = dataclasses.replace(run, status=RunStatus.FAILED, error=error)
        atomic_write_json(path, run.to_json())
