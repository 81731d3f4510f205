"""Shrunk failures as files that replay exactly: DIR/failures/<id>.json."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

from harness import compat
from harness.compare import TOLERANCE_VERSION
from harness.record import atomic_write_json
from harness.runner import CaseResult

FAILURE_SCHEMA = 1


def failure_document(result: CaseResult, *, kernel: str, oracles: list[str], grads: bool) -> dict[str, Any]:
    """Everything needed to replay `result` exactly, and what it looked like when it failed."""
    return {
        "schema": FAILURE_SCHEMA,
        "kind": "failure",
        "created": dt.datetime.now(dt.UTC).isoformat(),
        "kernel": kernel,
        "oracles": oracles,
        "grads": grads,
        "case": result.case.to_json(),
        "interpret": compat.interpret_options().to_json(),
        "tolerance_version": TOLERANCE_VERSION,
        "versions": compat.library_versions(),
        "results": {
            s.implementation: {
                "passed": s.passed,
                "backend": s.backend,
                "error": s.error,
                "comparisons": [c.to_json() for c in s.comparisons],
            }
            for s in result.subjects
        },
    }


def failure_id(result: CaseResult, kernel: str) -> str:
    return f"{result.case.case_id}-{hashlib.sha256(kernel.encode()).hexdigest()[:6]}"


def write_failure(out_dir: Path, result: CaseResult, *, kernel: str, oracles: list[str], grads: bool) -> Path:
    path = Path(out_dir) / "failures" / f"{failure_id(result, kernel)}.json"
    atomic_write_json(path, failure_document(result, kernel=kernel, oracles=oracles, grads=grads))
    return path
