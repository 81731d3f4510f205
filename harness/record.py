"""Results records: versioned JSON, one file per result, written atomically.

Layout: STORE/records/<run_id>/<name>.json, plus STORE/records/<run_id>/run.json for the
run's metadata (kind "run": versions, machine, command, profile, status). run_id embeds
host, time and a random suffix, so stores from several machines merge by copying
directories. Every record has "schema" (RECORD_SCHEMA), "kind" and "run_id"; the
versions and machine of a record are those of its run.json.

kind "case"    (<case_id>--<impl>.json): one implementation on one case: case, implementation,
               role, backend, empty_rows, passed, error, comparisons, seconds,
               tolerance_version; "shrunk": true and "failure_file" on a minimal failure.
kind "bench"   (bench--<impl>--<shape>--<pass>.json): timing samples in seconds of one
               implementation at one benchmark shape: implementation, backend, shape
               (name and case), pass ("fwd" or "fwd_bwd"), samples, peak_rss_bytes,
               device_peak_bytes (null off an accelerator).
kind "compile" (compile--<impl>--<topology>--<shape>--<pass>.json): an ahead-of-time TPU
               compile: implementation, topology, shape, pass, ok, error, memory
               {argument, output, temp, generated_code, alias} bytes, cost {flops,
               bytes_accessed, transcendentals, optimal_seconds}, seconds, failure_file.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import re
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import compat
from harness.case import Case
from harness.compare import TOLERANCE_VERSION, Comparison

if TYPE_CHECKING:  # the runner imports jax; reading records must not
    from harness.runner import CaseResult, SubjectResult

RECORD_SCHEMA = 1


def new_run_id() -> str:
    host = re.sub(r"[^A-Za-z0-9]+", "-", socket.gethostname())[:24] or "host"
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{host}-{uuid.uuid4().hex[:6]}"


def machine() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
    }


def atomic_write_json(path: Path, data: Any) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def subject_record(
    case: Case, subject: SubjectResult, *, run_id: str, kind: str = "case", extra: dict | None = None
) -> dict[str, Any]:
    rec = {
        "schema": RECORD_SCHEMA,
        "kind": kind,
        "run_id": run_id,
        "time": dt.datetime.now(dt.UTC).isoformat(),
        "case_id": case.case_id,
        "case": case.to_json(),
        "implementation": subject.implementation,
        "role": subject.role,
        "backend": subject.backend,
        "empty_rows": subject.empty_rows,
        "passed": subject.passed,
        "error": subject.error,
        "traceback": subject.traceback,
        "comparisons": [c.to_json() for c in subject.comparisons],
        "seconds": subject.seconds,
        "tolerance_version": TOLERANCE_VERSION,
    }
    rec.update(extra or {})
    return rec


@dataclasses.dataclass
class RunStore:
    """One run's directory inside a store; every write is atomic and immediate."""

    root: Path
    run_id: str

    @classmethod
    def create(cls, root: Path | str, *, meta: dict[str, Any]) -> RunStore:
        store = cls(Path(root), new_run_id())
        store.write_meta({**meta, "status": "running"})
        return store

    @property
    def dir(self) -> Path:
        return self.root / "records" / self.run_id

    def write_meta(self, meta: dict[str, Any]) -> None:
        base = {
            "schema": RECORD_SCHEMA,
            "kind": "run",
            "run_id": self.run_id,
            "versions": compat.library_versions(),
            "machine": machine(),
        }
        atomic_write_json(self.dir / "run.json", {**base, **meta})

    def write_case(self, result: CaseResult, *, extra: dict[str, Any] | None = None) -> list[Path]:
        paths = []
        for subject in result.subjects:
            path = self.dir / f"{result.case.case_id}--{_safe(subject.implementation)}.json"
            atomic_write_json(path, subject_record(result.case, subject, run_id=self.run_id, extra=extra))
            paths.append(path)
        return paths


def iter_records(root: Path | str) -> Iterator[dict[str, Any]]:
    """Every record under a store (or several merged stores), run metadata included."""
    for path in sorted(Path(root).glob("records/*/*.json")):
        with open(path) as f:
            yield json.load(f)


def comparisons(record: dict[str, Any]) -> list[Comparison]:
    return [Comparison.from_json(c) for c in record.get("comparisons", [])]
