"""The worker processes of `run --jobs N`: one per shard, each into its log, stops forwarded to them, their exit
statuses combined."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.core.exit_codes import (
    EXIT_CANNOT_RUN,
    EXIT_FAIL,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PARENT_PID_ENV,
)
from harness.running.jobs import stream
from harness.running.jobs.shard import Shard

# Environment variable a worker of `run --jobs` finds its parent's token in (written to its run.json).
PARENT_ENV = "ATTN_HARNESS_JOBS_PARENT"
# After a stop is forwarded, how long the workers have to record what they finished before they are killed.
STOP_GRACE_S = 60.0
# How often the parent reads its workers' logs: a case line shows within this of its worker writing it.
POLL_S = 0.2
JOBS_ENV = "ATTN_HARNESS_JOBS"
# When shards disagree, the run's exit status is the most serious: a harness failure, bad input,
# a discrepancy, a kernel that cannot run here, then all pass.
_SEVERITY = (EXIT_HARNESS, EXIT_USAGE, EXIT_FAIL, EXIT_CANNOT_RUN, EXIT_OK)


def default_jobs() -> int:
    """$ATTN_HARNESS_JOBS, else the number of cores."""
    chosen = os.environ.get(JOBS_ENV)
    if chosen:
        try:
            return int(chosen)
        except ValueError:
            raise ValueError(f"{JOBS_ENV}={chosen!r} must be a whole number of worker processes") from None
    return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workers:
    """How the worker processes of one `run --jobs` ended."""

    code: int  # the run's exit status (worst)
    token: str  # the parent token in each worker's run.json
    interrupted: bool  # a stop (SIGINT, SIGTERM) reached the parent and was forwarded
    codes: tuple[int, ...]  # each worker's exit status, by shard


def run_workers(
    argv: Callable[[Shard], list[str]], jobs: int, *, logs: Path, line: Callable[[int, str], None]
) -> Workers:
    """Run `jobs` shards as worker processes, shard i's command line `argv(Shard(i, jobs))`, and wait for all.

    Each worker's stdout and stderr go to its log in the folder `logs` (stream.log_name), never to this
    process's terminal; each whole line a worker writes is handed to `line(i, text)` as it comes
    (harness.running.jobs.stream.Merge makes them one stream). SIGINT and SIGTERM are handled here
    whatever this process inherited (a background job of `sh -c` starts with SIGINT ignored):
    the stop is forwarded to every worker as SIGTERM, and the workers, which install their own
    handlers (harness.cli.commands._shared.interrupt_signals), record what they finished and
    exit; a worker still running STOP_GRACE_S later is killed. A worker whose parent dies gets
    SIGTERM from the kernel (PARENT_PID_ENV, harness.running.worker.die_with_parent). The caller
    marks a run.json a worker left "running" (harness.running.session).
    """
    token = uuid.uuid4().hex[:12]
    # Unbuffered: a worker's stdout is a file, and its lines must reach the parent as each case ends,
    # in the order they were written to stdout and stderr.
    env = {**os.environ, PARENT_ENV: token, PARENT_PID_ENV: str(os.getpid()), "PYTHONUNBUFFERED": "1"}
    procs: list[subprocess.Popen] = []
    stops: list[float] = []

    def stop(signum: int, frame: object) -> None:
        if not stops:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        stops.append(time.monotonic())

    logs.mkdir(parents=True, exist_ok=True)
    with _handling_stops(stop), contextlib.ExitStack() as files:
        followed: list[_Log] = []
        for i in range(jobs):
            if stops:
                break
            path = logs / stream.log_name(Shard(i, jobs))
            written = files.enter_context(open(path, "wb"))
            followed.append(_Log(i, files.enter_context(open(path, "rb", buffering=0))))
            cmd = [sys.executable, "-m", "harness", *argv(Shard(i, jobs))]
            procs.append(subprocess.Popen(cmd, env=env, stdout=written, stderr=subprocess.STDOUT))
        codes = _wait(procs, stops, followed, line)
    if stops:
        # What is left is the merged summary: a later signal is recorded by `stop`, nothing more.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop)
        # A worker ended by the forwarded stop before it could handle it was interrupted, not broken.
        stopped = (-signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM)
        codes = [EXIT_INTERRUPTED if c in stopped else c for c in codes]
    code = worst(codes + [EXIT_INTERRUPTED] * (jobs - len(codes))) if codes else EXIT_INTERRUPTED
    return Workers(code=code, token=token, interrupted=bool(stops), codes=tuple(codes))


def _wait(
    procs: list[subprocess.Popen], stops: list[float], logs: list[_Log], line: Callable[[int, str], None]
) -> list[int]:
    """Each worker's exit status, its log's lines handed on meanwhile; a worker that outlives a forwarded stop by
    STOP_GRACE_S is killed."""
    while True:
        for log in logs:
            log.read(line)
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            for log in logs:
                log.read(line, final=True)
            return [c for c in codes if c is not None]
        if stops and time.monotonic() - stops[0] > STOP_GRACE_S:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(POLL_S)


@dataclasses.dataclass
class _Log:
    """A worker's log as the parent reads it: the lines written since the last read, a partial one held back."""

    shard: int
    file: io.RawIOBase
    partial: bytes = b""

    def read(self, line: Callable[[int, str], None], *, final: bool = False) -> None:
        """Hand each whole line written since the last read to `line`; `final`: the last one too, whole or not."""
        *whole, self.partial = (self.partial + (self.file.read() or b"")).split(b"\n")
        if final and self.partial:
            whole, self.partial = [*whole, self.partial], b""
        for raw in whole:
            line(self.shard, raw.decode(errors="replace").rstrip("\r"))


@contextlib.contextmanager
def _handling_stops(handler: Any) -> Iterator[None]:
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def worst(codes: list[int]) -> int:
    """The most serious exit status of several workers (an unknown one counts as a harness failure)."""
    for code in _SEVERITY:
        if code in codes:
            if any(c not in _SEVERITY for c in codes):
                return EXIT_HARNESS
            return code
    return EXIT_HARNESS
