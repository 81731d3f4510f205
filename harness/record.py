"""Results records: versioned JSON, one file per result, written atomically.

Layout: STORE/records/<run_id>/<name>.json, plus STORE/records/<run_id>/run.json for the
run's metadata (kind "run": versions, machine, command, profile, status, and api_parameters:
per implementation and wrapped API, which declared parameters the installed library has,
harness.coverage). run_id embeds
host, time and a random suffix, so stores from several machines merge by copying
directories. Every record has "schema" (RECORD_SCHEMA), "kind" and "run_id"; the
versions and machine of a record are those of its run.json.

kind "case"    (<case_id>--<impl>.json): one implementation on one case: case, implementation,
               role, backend, device (where it computed, harness.placement), empty_rows, passed,
               error, comparisons, seconds, native (on an accelerator: harness.native timings
               and device memory, else null), digest (a hash of the returned arrays, to the
               bit; null when it raised), tolerance_version, exercised (the drawn API
               parameters the case exercised, "API.param": harness.coverage); "shrunk": true and
               "failure_file" on a minimal failure, with "located" (harness.locate.Located
               JSON): where its errors sit.
kind "bench"   (bench--<impl>--<shape>--<pass>.json): timing samples in seconds of one
               implementation at one benchmark shape: implementation, backend, note, timed
               ("jit" or "run"), device, shape {name, case}, pass ("fwd" or "fwd_bwd"), samples,
               stats, peak_rss_bytes, device_peak_bytes (null off an accelerator). Timings
               with backend "tpu_interpret" are never compared with "tpu" ones.
kind "compile" (compile--<impl>--<topology>--<shape>--<pass>.json): an ahead-of-time TPU
               compile: implementation, backend "tpu_compile_only", topology, shape {name,
               case}, case_id, pass, ok (= passed), error, memory {argument, output, temp,
               generated_code, alias} bytes, cost {flops, bytes_accessed, transcendentals,
               optimal_seconds}, seconds, failure_file.
kind "leak"    (leak--<impl>--<variant>.json): one kernel called many times one way (harness.leak):
               leak_schema, implementation, backend, variant ("fwd-run", "fwd_bwd-jit", ...),
               pass, via, case, case_id, calls, warmup_calls, samples {series: [one value per
               call]}, growth [{series, slope, limit, first, last}], growing (one line per
               series past its limit), passed, error, seconds.

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


def api_parameters() -> dict[str, dict[str, dict[str, Any]]]:
    """Which parameters of each registered implementation's wrapped API exist in the installed libraries
    (harness.coverage.api_parameters): implementation -> API -> installed, present, absent, undeclared."""
    from harness import contract, coverage  # the kernels import jax; reading records must not

    return coverage.api_parameters(contract.registry().values())


def _exercised(implementation: str, case: Case) -> list[str]:
    """The drawn API parameters `case` exercised in `implementation` (harness.coverage.exercised); [] for
    one that declares no API or is not loaded in this process."""
    from harness import contract, coverage  # the kernels import jax; reading records must not

    impl = contract.registry().get(implementation)
    if impl is None:
        try:
            impl = contract.resolve(implementation)
        except Exception:  # noqa: BLE001 - a name this process cannot load: nothing to count
            return []
    return coverage.exercised(impl, case)


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
        "device": subject.device,
        "native": subject.native,
        "digest": subject.digest,
        "empty_rows": subject.empty_rows,
        "passed": subject.passed,
        "error": subject.error,
        "traceback": subject.traceback,
        "comparisons": [c.to_json() for c in subject.comparisons],
        "seconds": subject.seconds,
        "tolerance_version": TOLERANCE_VERSION,
        "exercised": _exercised(subject.implementation, case),
    }
    rec.update(extra or {})
    # Where the errors sit (a few KB) on the failures the report draws: the shrunk one and any
    # with a failure file; the many failing examples met while shrinking are listed, not drawn.
    if subject.located is not None and (rec.get("shrunk") or rec.get("failure_file")):
        rec["located"] = subject.located.to_json()
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
            "api_parameters": api_parameters(),
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


# --- Compile and benchmark records, and merging stores from several machines ---


def safe_name(name: str) -> str:
    """`name` with every character a file name should not hold replaced by "_"."""
    return _safe(name)


def write_record(store: RunStore, name: str, record: dict[str, Any]) -> Path:
    """Write one record (its "kind" and fields already set) as STORE/records/<run_id>/<name>.json."""
    path = store.dir / f"{_safe(name)}.json"
    atomic_write_json(path, {"schema": RECORD_SCHEMA, "run_id": store.run_id, **record})
    return path


def compile_record(result: Any, *, run_id: str) -> dict[str, Any]:
    """A kind "compile" record from a harness.compile.CompileResult."""
    return {
        "schema": RECORD_SCHEMA,
        "kind": "compile",
        "run_id": run_id,
        "time": dt.datetime.now(dt.UTC).isoformat(),
        "implementation": result.implementation,
        "backend": "tpu_compile_only",
        "topology": result.topology,
        "shape": {"name": result.shape, "case": result.case.to_json()},
        "case_id": result.case.case_id,
        "pass": result.pass_,
        "ok": result.ok,
        "passed": result.ok,
        "error": result.error,
        "memory": result.memory,
        "cost": result.cost,
        "seconds": result.seconds,
        "failure_file": result.failure_file,
    }


def write_compile(store: RunStore, result: Any) -> Path:
    name = f"compile--{result.implementation}--{result.topology}--{result.shape}--{result.pass_}"
    return write_record(store, name, compile_record(result, run_id=store.run_id))


class MergeError(ValueError):
    """A source store that cannot be merged; nothing was copied. The message names the file."""


@dataclasses.dataclass
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
    """
    dest = Path(dest)
    report = MergeReport()
    plan: list[tuple[Path, Any, bool]] = []  # (destination, content, is a failure file)
    for source in map(Path, sources):
        if not (source / "records").is_dir():
            raise FileNotFoundError(f"{source} is not a results store: it has no records/ directory")
        for pattern, failure in (("records/*/*.json", False), ("failures/*.json", True)):
            for src in sorted(source.glob(pattern)):
                plan.append((dest / src.relative_to(source), _read_source(src), failure))
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
