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

import dataclasses
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from harness.core import pool
from harness.core.case import Case
from harness.core.exit_codes import EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_HARNESS, EXIT_OK, EXIT_USAGE

# Environment variable a worker of `run --jobs` finds its parent's token in (written to its run.json).
PARENT_ENV = "ATTN_HARNESS_JOBS_PARENT"
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


def worker_argv(argv: list[str], shard: Shard) -> list[str]:
    """`argv` (a `run` command line without --jobs or --shard) for one worker."""
    return [*argv, "--jobs", "1", "--shard", str(shard)]


def run_workers(argv: list[str], jobs: int) -> tuple[int, str]:
    """Run `jobs` shards of `argv` as worker processes and wait for all; (exit status, parent token).

    Each worker's output goes straight to this process's stdout and stderr (lines of
    different workers interleave; each line is whole). Ctrl-C reaches the workers too,
    as the process group's signal; they stop and write their summaries.
    """
    token = uuid.uuid4().hex[:12]
    env = {**os.environ, PARENT_ENV: token}
    procs = [
        subprocess.Popen([sys.executable, "-m", "harness", *worker_argv(argv, Shard(i, jobs))], env=env)
        for i in range(jobs)
    ]
    try:
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:
        codes = [p.wait() for p in procs]
        return EXIT_FAIL, token
    return worst(codes), token


def worst(codes: list[int]) -> int:
    """The most serious exit status of several workers (an unknown one counts as a harness failure)."""
    for code in _SEVERITY:
        if code in codes:
            if any(c not in _SEVERITY for c in codes):
                return EXIT_HARNESS
            return code
    return EXIT_HARNESS


def worker_runs(store: Path, token: str) -> list[dict[str, Any]]:
    """The run.json of every worker of the `run --jobs` with this token, by shard."""
    runs = []
    for path in sorted(store.glob("records/*/run.json")):
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if meta.get("jobs_parent") == token:
            runs.append(meta)
    return sorted(runs, key=lambda m: Shard.parse(m.get("shard", "0/1")).index)


def merge_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary row per kernel (and oracle) over every worker's rows: counts summed,
    the worst error kept, seconds the longest worker's, status the most serious."""
    order = ("interrupted", "FAIL", "ORACLE FINDING", "INTERPRETER DIVERGENCE", "cannot run here", "PASS")
    merged: dict[str, dict[str, Any]] = {}
    for meta in runs:
        for row in meta.get("summary", []):
            into = merged.setdefault(row["kernel"], {**row, "examples": 0, "failed": 0, "seconds": 0.0, "worst": None})
            into["examples"] += row["examples"]
            into["failed"] += row["failed"]
            into["seconds"] = max(into["seconds"], row["seconds"])
            worsts = [w for w in (into["worst"], row["worst"]) if w is not None]
            into["worst"] = max(worsts, default=None)
            statuses = [into["status"], row["status"]]
            into["status"] = min(statuses, key=lambda s: order.index(s) if s in order else -1)
    return list(merged.values())


def worker_cases(store: Path, run_ids: set[str], kernel: str) -> list[Case]:
    """The cases the workers checked for `kernel`, in the order they finished (shrink results left out)."""
    found = []
    for run_id in sorted(run_ids):
        for path in (store / "records" / run_id).glob("*.json"):
            if path.name == "run.json":
                continue
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if rec.get("implementation") == kernel and rec.get("kind") == "case" and not rec.get("shrunk"):
                found.append((rec.get("time", ""), Case.from_json(rec["case"])))
    return [case for _, case in sorted(found, key=lambda tc: tc[0])]
