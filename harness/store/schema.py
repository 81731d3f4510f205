"""What every stored document starts with: a schema version and a kind, checked on load."""

from __future__ import annotations

import enum
from typing import Any

from harness.core.errors import InputError

# Version of the record layout (harness/store/__init__.py). Stores written since the first
# release carry 1; a reader meeting another number says so instead of misreading fields.
RECORD_SCHEMA = 1
SUPPORTED_SCHEMAS = frozenset({RECORD_SCHEMA})
# Version of a replayable failure file (harness.running.failures; drift replays are failure files too).
FAILURE_SCHEMA = 1
# Version of a compile failure file (harness.tpu.compile).
COMPILE_FAILURE_SCHEMA = 1


class Kind(enum.StrEnum):
    """The "kind" field of a record: which class in harness.store.records reads it."""

    RUN = "run"
    CASE = "case"
    BENCH = "bench"
    COMPILE = "compile"
    LEAK = "leak"


class RunStatus(enum.StrEnum):
    """run.json "status": only FINISHED means the records are everything the run was asked to do."""

    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    CANNOT_RUN = "cannot run here"


class KernelStatus(enum.StrEnum):
    """A run.json summary row's "status": how one kernel (or oracle, or compile or bench step) did."""

    PASS = "PASS"
    FAIL = "FAIL"
    # Every failure passed when replayed under its own interpreter (harness.core.verdicts): fails the run.
    FLAKY_FAIL = "FLAKY FAIL"
    # Every failure is a finding the run was told to expect (run --known): does not fail the run.
    KNOWN_FAIL = "KNOWN FAIL"
    INTERRUPTED = "interrupted"
    CANNOT_RUN = "cannot run here"  # the interpreter cannot run it here: a result, never a pass
    ORACLE_FINDING = "ORACLE FINDING"  # an oracle outside its own tolerance: never fails a kernel
    # A kernel's two Pallas interpreters disagreed (harness.running.runner.SubjectResult.divergence): never fails it
    INTERPRETER_DIVERGENCE = "INTERPRETER DIVERGENCE"


class RecordError(InputError):
    """A stored record this harness cannot read; the message is one line naming the file and why."""


def check_schema(doc: Any, where: str, *, supported: frozenset[int] = SUPPORTED_SCHEMAS) -> dict[str, Any]:
    """`doc` itself when it is a JSON object of a schema this harness reads, else RecordError."""
    if not isinstance(doc, dict):
        raise RecordError(f"{where}: not a JSON object")
    schema = doc.get("schema")
    if schema not in supported:
        known = ", ".join(map(str, sorted(supported)))
        raise RecordError(
            f"{where}: record schema {schema!r}, this harness reads {known}: "
            "read it with the harness release that wrote it"
        )
    return doc
