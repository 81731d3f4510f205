"""Writing a results store: atomic files, one run's directory, and merging stores.

Layout: STORE/records/<run_id>/<name>.json, plus STORE/records/<run_id>/run.json for the
run's metadata (harness.store.records.RunRecord; its api_parameters: per implementation and
wrapped API, which declared parameters the installed library has, harness.core.coverage). run_id
embeds host, time and a random suffix, so stores from several machines merge by copying
directories.

`merge_stores` (or `python -m harness merge`) copies the runs of several stores into one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import re
import socket
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from harness.core.case import Case
from harness.core.compare import TOLERANCE_VERSION, Comparison
from harness.core.errors import InputError
from harness.core.locate import Located
from harness.core.verdicts import Replay
from harness.runtime import compat
from harness.store.failures import failure_from_json
from harness.store.records import BenchRecord, CaseRecord, CompileRecord, Record, RunRecord, Shadow, now
from harness.store.schema import RecordError, RunStatus


class SubjectOutcome(Protocol):
    """What the store reads of one implementation's result on a case (harness.running.runner.SubjectResult
    has these): named here, so the store imports nothing of the runner (which imports jax; reading
    records must not) and nothing above its layer (tests/test_layers.py)."""

    implementation: str
    role: str
    backend: str
    device: str
    native: dict | None
    digest: str | None
    empty_rows: str
    passed: bool
    error: str | None
    traceback: str | None
    comparisons: list[Comparison]
    seconds: float
    located: Located | None
    interpreter: str | None
    replays: tuple[Replay, ...]

    @property
    def shadow(self) -> SubjectOutcome | None: ...


class CaseOutcome(Protocol):
    """What the store reads of one case's results (harness.running.runner.CaseResult has these)."""

    case: Case

    @property
    def subjects(self) -> Sequence[SubjectOutcome]: ...


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


def umask() -> int:
    """The process's file-creation mask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_mode(fd: int) -> None:
    """Give a file from tempfile.mkstemp (always 0600) the mode open() would: 0666 less the umask.

    Records, failure files and reports are shared: a CI artifact or a merged store read by
    another user must not come out readable by its writer only.
    """
    os.fchmod(fd, 0o666 & ~umask())


def atomic_write_json(path: Path, data: Any) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        publish_mode(fd)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def api_parameters(implementations: Iterable[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Which parameters of each wrapped API exist in the installed libraries (harness.core.coverage.api_parameters):
    implementation -> API -> installed, present, absent, undeclared. Of the built-ins the named implementations
    stand in for (coverage.declaring_name: what `harness coverage` looks up for their records), else of every
    registered one; resolving only those spares a run of one kernel importing every other (~2 CPU s)."""
    from harness.core import contract, coverage  # the kernels import jax; reading records must not

    if implementations is None:
        return coverage.api_parameters(contract.registry().values())
    names = dict.fromkeys(coverage.declaring_name(n) for n in implementations)
    return coverage.api_parameters([contract.resolve(n) for n in names])


def _exercised(implementation: str, case: Case) -> list[str]:
    """The drawn API parameters `case` exercised in `implementation` (harness.core.coverage.exercised); [] for
    one that declares no API or is not loaded in this process."""
    from harness.core import contract, coverage  # the kernels import jax; reading records must not

    try:
        impl = contract.resolve(implementation)  # a built-in's own module only (contract._builtin)
    except Exception:  # noqa: BLE001 - a name this process cannot load: nothing to count
        return []
    return coverage.exercised(impl, case)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def subject_record(
    case: Case, subject: SubjectOutcome, *, run_id: str, shrunk: bool = False, failure_file: str | None = None
) -> CaseRecord:
    # Where the errors sit (a few KB) on the failures the report draws: the shrunk one and any
    # with a failure file; the many failing examples met while shrinking are listed, not drawn.
    located = subject.located.to_json() if subject.located is not None and (shrunk or failure_file) else None
    return CaseRecord(
        run_id=run_id,
        time=now(),
        case_id=case.case_id,
        case=case.to_json(),
        implementation=subject.implementation,
        role=subject.role,
        backend=subject.backend,
        device=subject.device,
        native=subject.native,
        digest=subject.digest,
        empty_rows=subject.empty_rows,
        passed=subject.passed,
        error=subject.error,
        traceback=subject.traceback,
        comparisons=list(subject.comparisons),
        seconds=subject.seconds,
        tolerance_version=TOLERANCE_VERSION,
        exercised=_exercised(subject.implementation, case),
        shrunk=shrunk,
        failure_file=failure_file,
        located=located,
        interpreter=subject.interpreter,
        shadow=_shadow(subject.shadow),
        checks=list(subject.checks),
        replays=list(subject.replays) or None,
    )


def _shadow(shadow: SubjectOutcome | None) -> Shadow | None:
    if shadow is None:
        return None
    return Shadow(
        interpreter=shadow.interpreter,
        passed=shadow.passed,
        error=shadow.error,
        comparisons=list(shadow.comparisons),
        seconds=shadow.seconds,
    )


@dataclasses.dataclass
class RunStore:
    """One run's directory inside a store; every write is atomic and immediate."""

    root: Path
    run_id: str
    # The implementations the run checks, whose APIs run.json records (api_parameters); None: every registered one.
    implementations: tuple[str, ...] | None = None

    @classmethod
    def create(
        cls, root: Path | str, *, meta: dict[str, Any], implementations: Iterable[str] | None = None
    ) -> RunStore:
        names = None if implementations is None else tuple(implementations)
        store = cls(Path(root), new_run_id(), names)
        store.write_meta({**meta, "status": RunStatus.RUNNING})
        return store

    @property
    def dir(self) -> Path:
        return self.root / "records" / self.run_id

    def write_meta(self, meta: dict[str, Any]) -> None:
        """(Re)write run.json: this machine's versions, the installed APIs' parameters and `meta`
        (a command's own fields, its status)."""
        apis = api_parameters(self.implementations)
        base = {"versions": compat.library_versions(), "machine": machine(), "api_parameters": apis}
        doc = {**base, **meta, "schema": RunRecord.schema, "kind": "run", "run_id": self.run_id}
        atomic_write_json(self.dir / "run.json", RunRecord.from_json(doc, "run.json").to_json())  # validated

    def write_case(self, result: CaseOutcome, *, shrunk: bool = False, failure_file: str | None = None) -> list[Path]:
        paths = []
        for subject in result.subjects:
            rec = subject_record(result.case, subject, run_id=self.run_id, shrunk=shrunk, failure_file=failure_file)
            paths.append(self.write(rec))
        return paths

    def write(self, record: Record) -> Path:
        """Write one record as STORE/records/<run_id>/<record_name>.json."""
        if record.run_id != self.run_id:
            raise ValueError(f"a record of run {record.run_id} written into run {self.run_id}")
        path = self.dir / f"{record_name(record)}.json"
        atomic_write_json(path, record.to_json())
        return path


def record_name(rec: Record) -> str:
    """The file name (without .json) of a record in its run's directory, made file-safe.

    One record per name: a case per implementation, a benchmark per shape and pass, a compile
    per topology, shape and pass, a leak check per variant.
    """
    if isinstance(rec, RunRecord):
        return "run"
    if isinstance(rec, CaseRecord):
        name = f"{rec.case_id}--{rec.implementation}"
    elif isinstance(rec, BenchRecord):
        name = f"bench--{rec.implementation}--{rec.shape_name}--{rec.pass_}"
    elif isinstance(rec, CompileRecord):
        name = f"compile--{rec.implementation}--{rec.topology}--{rec.shape_name}--{rec.pass_}"
    else:
        name = f"leak--{rec.implementation}--{rec.variant}"
    return _safe(name)


def iter_records(root: Path | str) -> Iterator[dict[str, Any]]:
    """Every record under a store (or several merged stores), run metadata included, as JSON."""
    for path in sorted(Path(root).glob("records/*/*.json")):
        with open(path) as f:
            yield json.load(f)


# --- Compile records, and merging stores from several machines ---


def safe_name(name: str) -> str:
    """`name` with every character a file name should not hold replaced by "_"."""
    return _safe(name)


class MergeError(InputError):
    """A source store that cannot be merged; nothing was copied. The message names the file."""


@dataclasses.dataclass(kw_only=True)
class MergeReport:
    """What merge_stores did: files copied, files already present and identical, and conflicts.

    A conflict is a record with different content in a source and the destination: it is
    left as the destination has it. Two failure files of one id (one case failing on two
    machines: their times and results differ) are both kept, the incoming one beside the
    destination's as <id>--<hash of its content>.json, and listed in kept_both.
    """

    copied: int = 0
    identical: int = 0
    conflicts: list[str] = dataclasses.field(default_factory=list)
    kept_both: list[str] = dataclasses.field(default_factory=list)


def _read_json(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)


def _check_failure(path: Path, data: Any) -> None:
    """A failure file merges only when it still reads as one (harness.store.failures): replays need that."""
    try:
        failure_from_json(data, str(path))
    except RecordError as e:
        raise MergeError(f"{e}; nothing was merged: repair or remove it") from None


def _read_source(path: Path) -> Any:
    try:
        data = _read_json(path)
    except (OSError, UnicodeDecodeError) as e:
        raise MergeError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}; nothing was merged") from None
    except json.JSONDecodeError as e:
        raise MergeError(
            f"{path} is not JSON ({e.msg} at line {e.lineno}); nothing was merged: repair or remove it"
        ) from None
    if not isinstance(data, dict):
        raise MergeError(f"{path} is not a JSON object; nothing was merged: repair or remove it")
    return data


def merge_stores(sources: list[Path | str], dest: Path | str) -> MergeReport:
    """Copy every run's records and every failure file from `sources` into `dest`.

    Run ids embed host, time and a random suffix, so runs from different machines never
    share a directory and their records never collide, even for the same case ids. Copying
    the same run twice is a no-op. Every source file is read and checked before the first
    is copied: a corrupt source (MergeError) leaves `dest` as it was.

    The order of `sources` does not matter: files are copied in the order of their destination
    and content, so of two files for one name the same one keeps it (the other goes beside it,
    or is the conflict) whichever store came first. CI downloads its cells' stores in any order,
    and their merged report must be the same bytes.
    """
    dest = Path(dest)
    report = MergeReport()
    plan: list[tuple[Path, Any, bool]] = []  # (destination, content, is a failure file)
    for source in map(Path, sources):
        if not (source / "records").is_dir():
            raise MergeError(f"{source} is not a results store: it has no records/ directory; nothing was merged")
        for pattern, failure in (("records/*/*.json", False), ("failures/*.json", True)):
            for src in sorted(source.glob(pattern)):
                data = _read_source(src)
                if failure:
                    _check_failure(src, data)
                plan.append((dest / src.relative_to(source), data, failure))
    plan.sort(key=lambda p: (p[0], json.dumps(p[1], sort_keys=True)))
    for dst, data, failure in plan:
        if dst.exists():
            if _read_json(dst) == data:
                report.identical += 1
                continue
            if not failure:
                report.conflicts.append(f"{dst.relative_to(dest)} (kept the destination's)")
                continue
            digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
            beside = dst.with_name(f"{dst.stem}--{digest}.json")
            if beside.exists() and _read_json(beside) == data:
                report.identical += 1
                continue
            atomic_write_json(beside, data)
            report.copied += 1
            report.kept_both.append(f"{dst.relative_to(dest)} differs: kept both, the incoming as {beside.name}")
            continue
        atomic_write_json(dst, data)
        report.copied += 1
    return report
