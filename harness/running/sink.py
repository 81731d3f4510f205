"""Where a run's records go as it runs: the sink (the store, and the CLI's terminal), each finished case's recorder,
and the stop token a caller's signal handler sets.

The search hands each finished case down to a `CaseRecorder` (its divergence files, its record, its progress
line, a stop asked for), never back up to the session that started it: a walk of the plan through a run
(harness.running.session -> search -> runner, then settle) enters each module once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol

from harness.core.contract import Implementation
from harness.core.errors import InputError
from harness.running.failures import divergence_line, write_divergence
from harness.running.runner import CaseResult
from harness.runtime import compat
from harness.store.derive import repro_command
from harness.store.files import RunStore


class StopToken:
    """A stop asked for (Ctrl-C, `kill`): the signals received, and whether the run has settled.

    The caller's signal handler calls `request`; the run checks `requested()` after each finished
    case, so a stop whose KeyboardInterrupt was lost (raised where exceptions are ignored) still ends it.
    """

    def __init__(self) -> None:
        self.signals: list[int] = []
        # The run has stopped searching: what is left is its summary and run.json (see `settle`).
        self.settled = False

    def request(self, signum: int) -> None:
        self.signals.append(signum)

    def requested(self) -> bool:
        return bool(self.signals)

    def settle(self) -> None:
        """Called when the search is over: a signal after a stop is then recorded, never raised."""
        self.settled = True


def create_store(out: Path, meta: dict[str, Any], implementations: list[str] | None = None) -> RunStore:
    """The run's store; an --out that cannot hold one is bad input (exit 2), said before any case runs.
    implementations: those the run checks, whose APIs run.json records (default: every registered one)."""
    create_dir(out)
    try:
        return RunStore.create(out, meta=meta, implementations=implementations)
    except OSError as e:
        why = e.strerror or e
        raise InputError(f"--out={str(out)!r} cannot be written ({why}); give a writable directory") from None


def create_dir(out: Path) -> None:
    """The store directory; an --out that cannot be one is bad input (exit 2)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out={str(out)!r} is a file; give a directory (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = e.strerror or e
        raise InputError(f"--out={str(out)!r} cannot be written ({why}); give a writable directory") from None


class Sink(Protocol):
    """Where a run's records and progress go: the store, and (the CLI's) the terminal."""

    def open(self, meta: dict[str, Any], implementations: list[str]) -> Path:
        """Start the run's records (run.json says "running"); the directory they are in."""

    def write_case(self, result: CaseResult, *, shrunk: bool = False, failure_file: str | None = None) -> None: ...

    def write_meta(self, meta: dict[str, Any]) -> None: ...

    def progress(self, index: int, total: int, result: CaseResult) -> None:
        """Case `index` of up to `total` finished (after its records are written)."""

    def say(self, line: str) -> None: ...


class StoreSink:
    """The sink of a real run: a results store under `out`; what the run says is printed."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.store: RunStore | None = None

    def open(self, meta: dict[str, Any], implementations: list[str]) -> Path:
        self.store = create_store(self.out, meta, implementations)
        return self.store.dir

    def write_case(self, result: CaseResult, *, shrunk: bool = False, failure_file: str | None = None) -> None:
        assert self.store is not None, "open() the sink first"
        self.store.write_case(result, shrunk=shrunk, failure_file=failure_file)

    def write_meta(self, meta: dict[str, Any]) -> None:
        assert self.store is not None, "open() the sink first"
        self.store.write_meta(meta)

    def progress(self, index: int, total: int, result: CaseResult) -> None:
        pass

    def say(self, line: str) -> None:
        print(line, flush=True)


@dataclasses.dataclass(kw_only=True)
class CaseRecorder:
    """One kernel's search's finished cases, each recorded and said as it comes (the search calls it): a
    divergence between interpreters written as its own file, the case's record, its progress line; then a
    stop asked for ends the search (KeyboardInterrupt)."""

    sink: Sink
    stop: StopToken
    out: Path
    kernel: Implementation
    oracles: list[Implementation]
    grads: bool
    interpret: compat.InterpretOptions
    time_limit: float | None
    total: int  # the cases the search plans
    done: int = 0

    def __call__(self, result: CaseResult) -> None:
        self.done += 1
        for subject in result.divergences:
            path = write_divergence(
                self.out,
                result,
                subject,
                kernel=self.kernel,
                oracles=self.oracles,
                grads=self.grads,
                interpret=self.interpret,
                time_limit=self.time_limit,
            )
            self.sink.say(f"   {divergence_line(subject)}\n   replay: {repro_command(str(path))}")
        self.sink.write_case(result)
        self.sink.progress(self.done, self.total, result)
        if self.stop.requested():
            raise KeyboardInterrupt(f"signal {self.stop.signals[0]}")
