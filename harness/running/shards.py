"""Splitting a run: `run --shard I/N` checks one deterministic part of it, `run --jobs N` runs N shards at once.

A shard is a search of its own over the cases whose program's id (the case with the values a
compiled program takes as data fixed, harness.core.pool.program_key), read as a number, is I modulo N:
the same draw as the whole run (same profile, same seed), with every case of another shard
filtered out, so shards are disjoint and the same every time. It checks its share of
`--examples` (the total over all shards), its smoke cases among them. Shards of one run
write into one store, each as a run directory of its own; `--jobs N` starts them as worker
processes on this machine and merges their summaries; CI starts them as jobs on several
machines and merges their stores (`harness merge`, .github/workflows/shards.yml).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from harness.core import pool
from harness.core.case import Case
from harness.core.exit_codes import (
    EXIT_CANNOT_RUN,
    EXIT_FAIL,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PARENT_PID_ENV,
)
from harness.core.summary import KernelSummary
from harness.running import signatures
from harness.store import records
from harness.store.failures import FailureRecord, Found
from harness.store.files import atomic_write_json
from harness.store.records import CaseRecord, RunRecord
from harness.store.schema import KernelStatus, RecordError, RunStatus

T = TypeVar("T")

# Environment variable a worker of `run --jobs` finds its parent's token in (written to its run.json).
PARENT_ENV = "ATTN_HARNESS_JOBS_PARENT"
# After a stop is forwarded, how long the workers have to record what they finished before they are killed.
STOP_GRACE_S = 60.0
JOBS_ENV = "ATTN_HARNESS_JOBS"
# When shards disagree, the run's exit status is the most serious: a harness failure, bad input,
# a discrepancy, a kernel that cannot run here, then all pass.
_SEVERITY = (EXIT_HARNESS, EXIT_USAGE, EXIT_FAIL, EXIT_CANNOT_RUN, EXIT_OK)


@dataclasses.dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """ "I/N" with 0 <= I < N; a ValueError that says so otherwise."""
        index, sep, count = text.partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            raise ValueError(f"--shard={text!r} must be I/N, e.g. 0/4 (shard 0 of 4)") from None
        if not sep or shard.count < 1 or not 0 <= shard.index < shard.count:
            raise ValueError(f"--shard={text!r} must be I/N with 0 <= I < N, e.g. 0/4")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, case: Case) -> bool:
        """Whether `case` is this shard's: its program's case id (harness.core.pool.program_key)
        modulo the number of shards, so that each compiled program is compiled by one shard only."""
        return self.count == 1 or int(pool.program_key(case).case_id, 16) % self.count == self.index

    def examples(self, total: int) -> int:
        """This shard's share of `total` cases (the first total % N shards take one more); at least 1."""
        return max(total // self.count + (self.index < total % self.count), 1)


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


def run_workers(argv: Callable[[Shard], list[str]], jobs: int) -> Workers:
    """Run `jobs` shards as worker processes, shard i's command line `argv(Shard(i, jobs))`, and wait for all.

    Each worker's output goes straight to this process's stdout and stderr (lines of
    different workers interleave; each line is whole). SIGINT and SIGTERM are handled here
    whatever this process inherited (a background job of `sh -c` starts with SIGINT ignored):
    the stop is forwarded to every worker as SIGTERM, and the workers, which install their own
    handlers (harness.cli.commands._shared.interrupt_signals), record what they finished and
    exit; a worker still running STOP_GRACE_S later is killed. A worker whose parent dies gets
    SIGTERM from the kernel (PARENT_PID_ENV, harness.running.worker.die_with_parent). The caller
    marks a run.json a worker left "running" (harness.running.session).
    """
    token = uuid.uuid4().hex[:12]
    env = {**os.environ, PARENT_ENV: token, PARENT_PID_ENV: str(os.getpid())}
    procs: list[subprocess.Popen] = []
    stops: list[float] = []

    def stop(signum: int, frame: object) -> None:
        if not stops:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        stops.append(time.monotonic())

    with _handling_stops(stop):
        for i in range(jobs):
            if stops:
                break
            cmd = [sys.executable, "-m", "harness", *argv(Shard(i, jobs))]
            procs.append(subprocess.Popen(cmd, env=env))
        codes = [_wait(p, stops) for p in procs]
    if stops:
        # What is left is the merged summary: a later signal is recorded by `stop`, nothing more.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop)
        # A worker ended by the forwarded stop before it could handle it was interrupted, not broken.
        stopped = (-signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM)
        codes = [EXIT_INTERRUPTED if c in stopped else c for c in codes]
    code = worst(codes + [EXIT_INTERRUPTED] * (jobs - len(codes))) if codes else EXIT_INTERRUPTED
    return Workers(code=code, token=token, interrupted=bool(stops), codes=tuple(codes))


def _wait(proc: subprocess.Popen, stops: list[float]) -> int:
    """proc's exit status; killed when it outlives a forwarded stop by STOP_GRACE_S."""
    while True:
        try:
            return proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            if stops and time.monotonic() - stops[0] > STOP_GRACE_S:
                proc.kill()


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


def _read(path: Path, parse: Callable[[Any, str], T]) -> T | None:
    """The typed record in `path`; None where it cannot be read (a worker killed mid-write, another kind)."""
    try:
        return parse(json.loads(path.read_text()), str(path))
    except (OSError, ValueError, RecordError):
        return None


def _shard_index(run: RunRecord) -> int:
    return Shard.parse(run.shard or "0/1").index


def worker_runs(store: Path, token: str) -> list[RunRecord]:
    """The run.json of every worker of the `run --jobs` with this token, by shard."""
    runs = [_read(path, RunRecord.from_json) for path in sorted(store.glob("records/*/run.json"))]
    return sorted((r for r in runs if r is not None and r.jobs_parent == token), key=_shard_index)


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


def _case_records(store: Path, run_id: str) -> Iterator[tuple[Path, CaseRecord]]:
    """Every case record of one run directory that reads, with its path."""
    for path in sorted((store / "records" / run_id).glob("*.json")):
        if path.name == "run.json":
            continue
        rec = _read(path, records.from_json)
        if isinstance(rec, CaseRecord):
            yield path, rec


def worker_cases(store: Path, run_ids: set[str], kernel: str) -> list[Case]:
    """The cases the workers checked for `kernel`, in the order they finished (shrink results left out)."""
    found = [
        (rec.time or "", Case.from_json(rec.case))
        for run_id in sorted(run_ids)
        for _, rec in _case_records(store, run_id)
        if rec.implementation == kernel and not rec.shrunk and rec.case is not None
    ]
    return [case for _, case in sorted(found, key=lambda tc: tc[0])]


def mark_unfinished(store: Path, token: str, codes: list[int], *, interrupted: bool) -> None:
    """A worker's run.json still "running" after it ended (killed before it could write more)
    ends "interrupted" after a stop, else "failed" with how the worker ended."""
    for path in store.glob("records/*/run.json"):
        run = _read(path, RunRecord.from_json)
        if run is None or run.jobs_parent != token or run.status != RunStatus.RUNNING:
            continue
        index = _shard_index(run)
        code = codes[index] if index < len(codes) else None
        if interrupted:
            run = dataclasses.replace(run, status=RunStatus.INTERRUPTED)
        else:
            error = f"the worker process ended with exit status {code}"
            run = dataclasses.replace(run, status=RunStatus.FAILED, error=error)
        atomic_write_json(path, run.to_json())


# --- one bug found by several shards ---

# Where the parent of a `run --jobs` moves a shard's failure file whose bug another shard's failure
# explains (same_bugs): kept, beside the bug's own file, which lists it.
SAME_BUG_DIR = "same-bug"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Reported:
    """One failure a worker reported: its file, signature, and the records (kernel and oracles) naming it."""

    shard: int
    order: int  # the worker's "n of m"
    kernel: str
    path: Path
    signature: signatures.Signature
    shrunk: bool
    reduced: bool  # its features are its trigger (search info "trigger"): one trigger, one bug
    records: tuple[Path, ...]
    finding: str | None = None  # the known finding it was named as (harness.running.known): one finding, one bug


@dataclasses.dataclass(frozen=True, kw_only=True)
class SameBug:
    """A failure one shard reported that another shard's failure explains: one bug, reported once."""

    kernel: str
    kept: Path  # the bug's failure file
    moved: Path | None  # where the other file is now (failures/same-bug/); None: both shrank to one case, one file
    signature: str

    def line(self) -> str:
        where = f"{self.moved} is" if self.moved is not None else "two shards' failures are"
        return f"{self.kernel}: {where} the same bug as {self.kept} ({self.signature})"


def _reported(store: Path, runs: list[RunRecord]) -> list[_Reported]:
    """Every failure the workers reported with a signature, in shard order, then in the order each found them."""
    out = []
    for run in runs:
        named: dict[Path, list[Path]] = {}
        for path, rec in _case_records(store, run.run_id):
            if rec.shrunk and rec.failure_file:
                named.setdefault(_located(store, rec.failure_file), []).append(path)
        for file, paths in named.items():
            doc = _read(file, FailureRecord.from_json)
            try:
                found = doc.found() if doc is not None else None
            except RecordError:
                continue  # its search info unreadable: never merged
            if doc is None or found is None or found.signature_parts is None:
                continue  # unreadable, written by another command, or from before signatures were written
            try:
                sig = signatures.Signature.from_json(found.signature_parts)
            except (ValueError, KeyError, TypeError):
                continue  # a signature this harness cannot read: never merged
            out.append(
                _Reported(
                    shard=_shard_index(run),
                    order=found.order,
                    kernel=doc.kernel,
                    path=file,
                    signature=sig,
                    shrunk=found.shrunk is not False,
                    reduced=found.trigger is not None,
                    records=tuple(paths),
                    finding=found.finding,
                )
            )
    return sorted(out, key=lambda r: (r.shard, r.order))


def _located(store: Path, recorded: str) -> Path:
    path = Path(recorded)
    return path if path.exists() else store / "failures" / path.name


def _explains(known: _Reported, other: _Reported) -> bool:
    if known.kernel != other.kernel:
        return False
    if known.finding is not None or other.finding is not None:
        # Named as one finding (its proven fix passes both cases): one bug, whatever the shards shrank to. Named
        # as another, or not named (the fix leaves it failing): another bug, whatever the features say.
        return known.finding == other.finding
    return signatures.subsumes(known.signature, other.signature, anywhere=not known.shrunk, trigger=known.reduced)


def _replaces(other: _Reported, known: _Reported) -> bool:
    """Whether `other`, one bug with `known`, is the better file of it: one finding's, reduced to its trigger where
    `known` is not (a shard whose shrink budget ran out before the trigger search)."""
    return other.finding is not None and other.finding == known.finding and other.reduced and not known.reduced


def same_bugs(store: Path, runs: list[RunRecord]) -> list[SameBug]:
    """The failures of a `run --jobs`'s workers that another worker's failure explains (as one search
    explains its own, harness.running.distinct): each bug keeps one failure file, the most general
    (fewest features) one (of failures named as one known finding, one reduced to its trigger), and lists the
    others under search.also_found; each other file moves to
    failures/same-bug/ (search.same_bug_as names the kept one) and its records name the kept file,
    so that the summary, the report and the gate count the bug once. Nothing is deleted."""
    reported = _reported(store, runs)
    kept: list[int] = []
    into: dict[int, int] = {}  # a reported failure (its index) -> the one that explains it
    for i, r in enumerate(reported):
        known = next((k for k in kept if _explains(reported[k], r)), None)
        if known is not None and not _replaces(r, reported[known]):
            into[i] = known
            continue
        gone = [k for k in kept if r.shrunk and _explains(r, reported[k])]
        kept = [k for k in kept if k not in gone] + [i]
        into |= {k: i for k in gone}
    out = []
    for i in sorted(into):
        final = into[i]
        while final in into:  # explained by one that a more general failure replaced since
            final = into[final]
        out.append(_merge(reported[i], reported[final]))
    return out


def nested(store: Path, runs: list[RunRecord]) -> list[str]:
    """Failures of two shards kept as two bugs where one's trigger nests in the other's (signatures.nests: one
    holds the other's, failing another way; or in the case of a failure not reduced to its trigger, its shrink
    budget spent): said, not merged. Read after same_bugs."""
    kept = _reported(store, runs)
    return [
        f"{outer.kernel}: the {'trigger' if outer.reduced else 'case'} of {outer.path} "
        f"{'holds that' if outer.reduced else 'has the trigger'} of {inner.path} ({inner.signature})"
        for outer in kept
        for inner in kept
        if inner.reduced and inner.shard != outer.shard and inner.path != outer.path and inner.kernel == outer.kernel
        if signatures.nests(inner.signature, outer.signature)
    ]


def file_as_same_bug(dup: Path, kept: Path, also: dict[str, Any]) -> Path:
    """Move failure file `dup` to failures/same-bug/ beside `kept`, the file of the bug it is one of: the
    moved file's search.same_bug_as names the kept one, whose search.also_found lists `also` (where the
    other file is now, and why it is the same bug). Nothing is deleted. The moved file's path."""
    moved = kept.parent / SAME_BUG_DIR / dup.name
    moved.parent.mkdir(parents=True, exist_ok=True)
    doc = FailureRecord.from_json(json.loads(dup.read_text()), str(dup))
    said = dataclasses.replace(doc.found() or Found(), same_bug_as=kept.name)
    atomic_write_json(moved, dataclasses.replace(doc, search=said.to_json()).to_json())
    dup.unlink()
    bug = FailureRecord.from_json(json.loads(kept.read_text()), str(kept))
    found = bug.found() or Found()
    found = dataclasses.replace(found, also_found=(*found.also_found, also))
    atomic_write_json(kept, dataclasses.replace(bug, search=found.to_json()).to_json())
    return moved


def _merge(dup: _Reported, bug: _Reported) -> SameBug:
    """Move `dup`'s file beside `bug`'s, noted in both, and point `dup`'s records at `bug`'s file."""
    if dup.path == bug.path:  # both shards shrank to the same case: one file already
        return SameBug(kernel=bug.kernel, kept=bug.path, moved=None, signature=str(bug.signature))
    moved = bug.path.parent / SAME_BUG_DIR / dup.path.name
    if dup.path.exists():  # else another shard's records named it too, and it moved with theirs
        also = {"file": f"{SAME_BUG_DIR}/{dup.path.name}", "shard": dup.shard, "signature": str(dup.signature)}
        file_as_same_bug(dup.path, bug.path, also)
    for path in dup.records:
        rec = CaseRecord.from_json(json.loads(path.read_text()), str(path))
        atomic_write_json(path, dataclasses.replace(rec, failure_file=str(bug.path)).to_json())
    return SameBug(kernel=bug.kernel, kept=bug.path, moved=moved, signature=str(bug.signature))
