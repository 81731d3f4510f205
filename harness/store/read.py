"""Reading a results store fast, and choosing the runs a comparison uses.

Records are parsed into their classes (harness.store.records) and grouped by kind once,
here, so every later step walks only typed records of the kind it needs. A file that does
not parse is listed in `problems`, never dropped silently. A baseline or
candidate is named by a SPEC:

  PATH             a store directory (every run under PATH/records/) or one run's directory;
  RUN_ID           one run in the --store stores (a unique prefix is enough);
  KEY=VALUE[,...]  every run in the --store stores whose library version (run.json
                   "versions"), run field ("profile", "cell", ...) or machine field ("host")
                   KEY equals VALUE, or starts with VALUE followed by "." ("jax=0.10" matches 0.10.2).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from harness.core.errors import InputError
from harness.store.records import BenchRecord, CaseRecord, CompileRecord, LeakRecord, RunRecord, from_json
from harness.store.schema import RecordError, RunStatus


class SpecError(InputError):
    """A store path or run selector that selects nothing; the message says what exists."""


@dataclasses.dataclass(kw_only=True)
class Records:
    """Records grouped by kind. runs: run_id -> run.json. problems: files that could not be read."""

    runs: dict[str, RunRecord] = dataclasses.field(default_factory=dict)
    cases: list[CaseRecord] = dataclasses.field(default_factory=list)
    benches: list[BenchRecord] = dataclasses.field(default_factory=list)
    compiles: list[CompileRecord] = dataclasses.field(default_factory=list)
    leaks: list[LeakRecord] = dataclasses.field(default_factory=list)
    roots: list[Path] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.runs) + len(self.cases) + len(self.benches) + len(self.compiles) + len(self.leaks)

    @property
    def run_ids(self) -> set[str]:
        """Every run that has a record here, with or without its run.json."""
        ids = set(self.runs)
        for group in (self.cases, self.benches, self.compiles, self.leaks):
            ids.update(r.run_id for r in group)
        return ids

    def add(self, doc: Any, where: str) -> None:
        """Parse one stored document into its group, or list why it cannot be read."""
        try:
            rec = from_json(doc, where)
        except RecordError as e:
            self.problems.append(str(e))
            return
        if isinstance(rec, RunRecord):
            self.runs[rec.run_id] = rec
        else:
            group = {CaseRecord: self.cases, BenchRecord: self.benches, CompileRecord: self.compiles}
            group.get(type(rec), self.leaks).append(rec)  # type: ignore[arg-type]

    def subset(self, run_ids: set[str]) -> Records:
        return Records(
            runs={k: v for k, v in self.runs.items() if k in run_ids},
            cases=[r for r in self.cases if r.run_id in run_ids],
            benches=[r for r in self.benches if r.run_id in run_ids],
            compiles=[r for r in self.compiles if r.run_id in run_ids],
            leaks=[r for r in self.leaks if r.run_id in run_ids],
            roots=list(self.roots),
        )

    def incomplete(self, *, cannot_run: bool = True) -> list[str]:
        """Why these records may not be the whole story: unreadable files, runs that did not finish.

        A verdict over them is never PASS (a killed run's run.json still says "running").
        cannot_run=False leaves out the kernels the interpreter cannot run (`cannot_run()`), for a
        caller that judges them itself (the gate: not compared, or lost).
        """
        out = [f"unreadable or invalid record: {p}" for p in self.problems]
        for run_id, run in sorted(self.runs.items()):
            status = run.status
            if status == RunStatus.CANNOT_RUN and not cannot_run:
                continue
            if status == RunStatus.CANNOT_RUN:
                # A kernel the interpreter cannot run (Implementation.cannot_run): a result, never a pass.
                for kernel, error in sorted((run.cannot_run or {}).items()):
                    out.append(f"run {run_id}: {kernel} cannot run here: {error}")
            elif status is not None and status != RunStatus.FINISHED:
                why = run.error or "its records are only what it finished"
                out.append(f"run {run_id} is {status!r}, not finished: {why}")
        return out

    def cannot_run(self) -> dict[str, str]:
        """kernel -> the interpreter's error, for every kernel a run here said it cannot run (run.json)."""
        out: dict[str, str] = {}
        for _, run in sorted(self.runs.items()):
            if run.status == RunStatus.CANNOT_RUN:
                out.update(run.cannot_run or {})
        return out

    def merged(self, other: Records) -> Records:
        """Both sets; a run present in both (the same store named twice) counts once."""
        seen = self.run_ids
        extra = other.subset(other.run_ids - seen)
        return Records(
            runs={**self.runs, **extra.runs},
            cases=self.cases + extra.cases,
            benches=self.benches + extra.benches,
            compiles=self.compiles + extra.compiles,
            leaks=self.leaks + extra.leaks,
            roots=self.roots + [r for r in other.roots if r not in self.roots],
            problems=self.problems + other.problems,
        )


def _read_run_dir(run_dir: str, out: Records) -> None:
    # os.scandir and plain open+json.loads: for 10,000 small files glob and pathlib cost
    # more than the parsing.
    with os.scandir(run_dir) as it:
        names = sorted(e.name for e in it if e.name.endswith(".json") and not e.name.startswith("."))
    for name in names:
        path = os.path.join(run_dir, name)
        try:
            with open(path, "rb") as f:
                rec = json.loads(f.read())
        except (OSError, ValueError) as e:
            out.problems.append(f"{path}: unreadable ({type(e).__name__}: {e})")
            continue
        out.add(rec, path)


def is_store(path: Path) -> bool:
    return (path / "records").is_dir()


def is_run_dir(path: Path) -> bool:
    return (path / "run.json").is_file()


def load(paths: list[Path | str]) -> Records:
    """Every record under each path: a store (PATH/records/*/) or one run's directory."""
    out = Records()
    for p in map(Path, paths):
        if is_store(p):
            with os.scandir(p / "records") as it:
                run_dirs = sorted(e.path for e in it if e.is_dir())
        elif is_run_dir(p):
            run_dirs = [str(p)]
        elif p.is_dir():
            raise SpecError(f"{p} is neither a store (no {p / 'records'}) nor a run directory (no run.json)")
        else:
            raise SpecError(f"store {p} does not exist")
        out.roots.append(p)
        for d in run_dirs:
            _read_run_dir(d, out)
    return out


def _matches(run: RunRecord, key: str, want: str) -> bool:
    for source in (run.versions or {}, run.to_json(), run.machine or {}):
        if key in source:
            got = source[key]
            got = "" if got is None else str(got)
            return got == want or got.startswith(want + ".")
    return False


def select(spec: str, pool: Records) -> tuple[Records, str]:
    """The records a SPEC names (see the module docstring), and a label saying what it chose."""
    path = Path(spec)
    if path.is_dir():
        recs = load([path])
        if not recs.run_ids:
            raise SpecError(f"{spec} holds no records")
        return recs, f"{spec} ({len(recs.run_ids)} run{'s' if len(recs.run_ids) != 1 else ''})"
    if not pool.run_ids:
        roots = ", ".join(map(str, pool.roots)) or "none given"
        raise SpecError(f"{spec!r} is not a directory, and the --store stores ({roots}) hold no runs to select from")
    if "=" in spec:
        wanted = []
        for part in spec.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise SpecError(f"bad selector {part!r} in {spec!r}: expected KEY=VALUE, e.g. jax=0.10.2")
            wanted.append((key.strip(), value.strip()))
        ids = {rid for rid, run in pool.runs.items() if all(_matches(run, k, v) for k, v in wanted)}
        if not ids:
            seen = sorted(
                {f"{k}={(r.versions or {}).get(k, r.field(k))}" for r in pool.runs.values() for k, _ in wanted}
            )
            raise SpecError(f"no run matches {spec!r}; the stores have {', '.join(seen) or 'no runs'}")
        return pool.subset(ids), f"{spec} ({len(ids)} run{'s' if len(ids) != 1 else ''})"
    ids = {rid for rid in pool.run_ids if rid == spec} or {rid for rid in pool.run_ids if rid.startswith(spec)}
    if len(ids) > 1:
        raise SpecError(f"run id prefix {spec!r} is ambiguous: {', '.join(sorted(ids)[:5])}...")
    if not ids:
        raise SpecError(
            f"{spec!r} is not a directory, a KEY=VALUE selector, or a run id in the stores "
            f"(runs: {', '.join(sorted(pool.run_ids)[:5])}{'...' if len(pool.run_ids) > 5 else ''})"
        )
    return pool.subset(ids), f"run {next(iter(ids))}"


# --- Keys: what makes two records measure the same thing ---


def shape_name(rec: BenchRecord | CompileRecord) -> str:
    return rec.shape_name


def generation(topology: str) -> str:
    """ "v5e:2x2" -> "v5e": compiled memory is per TPU generation."""
    return str(topology).split(":")[0]


def bench_key(rec: BenchRecord) -> tuple[str, str, str, str]:
    """(implementation, shape, pass, where): `where` is the backend, and the device when recorded.

    Timings on different backends (the TPU interpreter measures the harness, a TPU the
    kernel) or devices are different series and are never compared.
    """
    where = str(rec.backend or "unknown")
    if rec.device:
        where += f" ({rec.device})"
    return (str(rec.implementation), shape_name(rec), str(rec.pass_), where)


def compile_key(rec: CompileRecord) -> tuple[str, str, str, str]:
    """(implementation, topology, shape, pass)."""
    return (str(rec.implementation), str(rec.topology), shape_name(rec), str(rec.pass_))


def samples(rec: BenchRecord) -> list[float]:
    """The finite timing samples of a bench record, in seconds."""
    out = []
    for x in rec.samples or []:
        try:
            v = float(x)
        except (TypeError, ValueError):
            continue
        if v == v and v not in (float("inf"), float("-inf")):
            out.append(v)
    return out
