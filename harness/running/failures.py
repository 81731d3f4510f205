"""Shrunk failures as files that replay exactly: DIR/failures/<id>.json.

A failure file (kind "failure", schema FAILURE_SCHEMA; its typed record is
harness.store.failures.FailureRecord) holds everything a replay needs and what the failure looked like:

  kernel, oracles    specs as `contract.resolve` reads them (a built-in name or MODULE:ATTR)
  grads              whether the backward pass ran
  case               the shrunk case (harness.core.case JSON), block sizes included
  interpret          the interpreter options (compat.InterpretOptions JSON)
  time_limit         per-subject seconds, or null
  tolerance_version  harness.core.compare.TOLERANCE_VERSION when it failed
  versions           python, jax, jaxlib, libtpu, torch, numpy, hypothesis and the harness
  host               the ISA XLA's CPU compiler targeted (harness.runtime.isa.describe): the float16 and
                     float32 rulers may round otherwise at another (docs/tolerance.md)
  failure            one line: why it failed
  results            per implementation: passed, backend, empty_rows (its declared convention for fully
                     masked rows), error, comparisons (the error table),
                     and on a failure "located": where the errors sit (harness.core.locate.Located JSON;
                     absent in files written before it existed, which replay and render alike);
                     "interpreter" where a Pallas interpreter ran it, and "<impl>@<interpreter>" for
                     the same kernel under the other interpreter where both ran

An interpreter divergence (harness.running.runner.SubjectResult.divergence) gets a file of the same
form under DIR/divergences/, with the fast interpreter's options, so that its replay shows the fast
interpreter's side; its failure line says what each interpreter saw.
  search             how it was found: profile, shrink_runs, shrink_exhausted (optional)
  pinned             set by `pin`: time, source file, kernel it was found with (optional)

`load_failure` is strict: a file it accepts can be replayed; anything else raises
FailureFileError with one line naming the file and the problem (the record's own checks, then the
case, the interpreter options and the implementations it names).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.core import contract, verdicts
from harness.core.case import Case, CaseError
from harness.core.compare import TOLERANCE_VERSION
from harness.core.errors import InputError
from harness.running import exactness
from harness.running.runner import CaseResult, Check, SubjectResult, run_case
from harness.running.worker import default_time_limit, implementation_spec
from harness.runtime import compat, isa
from harness.store.failures import FailureRecord
from harness.store.files import atomic_write_json
from harness.store.schema import RecordError


class FailureFileError(InputError):
    """A failure file that cannot be replayed; the message is one line naming file and problem."""


class CaseRefused(FailureFileError):
    """The file's case is outside the kernel's contract only because the installed release refuses it
    (contract.Refusal: the library's own error for an input it can be given): no wrong answer here."""


def failure_id(case: Case, kernel: str) -> str:
    return f"{case.case_id}-{hashlib.sha256(kernel.encode()).hexdigest()[:6]}"


def failure_line(result: CaseResult) -> str:
    return " | ".join(
        f"{s.implementation}: {s.failure}"
        + verdicts.flaky_suffix(s.passed, s.interpreter, s.replays, changed=verdicts.changed(s.comparisons))
        for s in result.subjects
        if not s.passed
    )


def divergence_line(subject: SubjectResult) -> str:
    """What each interpreter saw, for a subject with a shadow run."""
    shadow = subject.shadow
    assert shadow is not None, "a divergence has a run under the other interpreter"
    said = lambda s: "passed" if s.passed else f"failed: {s.failure}"  # noqa: E731
    return (
        f"interpreter divergence: {subject.implementation} on {subject.interpreter} {said(subject)}; "
        f"on {shadow.interpreter} {said(shadow)}"
    )


def _verdict_options(result: CaseResult, interpret: compat.InterpretOptions) -> compat.InterpretOptions:
    """The options a replay needs to see the kernel's verdict: those of the interpreter that gave it."""
    ran = [s.interpreter for s in result.subjects if s.role == "kernel" and s.interpreter is not None]
    return interpret.under(ran[0] if ran else None)


def failure_document(
    result: CaseResult,
    *,
    kernel: str,
    oracles: list[str],
    grads: bool,
    interpret: compat.InterpretOptions = compat.DEFAULT_INTERPRET,
    time_limit: float | None = None,
    search: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything needed to replay `result` exactly, and what it looked like when it failed (FailureRecord JSON)."""
    return FailureRecord(
        id=failure_id(result.case, kernel),
        created=dt.datetime.now(dt.UTC).isoformat(),
        kernel=kernel,
        oracles=tuple(oracles),
        grads=grads,
        case=result.case.to_json(),
        interpret=_verdict_options(result, interpret).to_json(),
        time_limit=time_limit,
        tolerance_version=TOLERANCE_VERSION,
        versions=compat.library_versions(),
        host=isa.describe(),
        failure=failure_line(result),
        results=results_table(result),
        search=search,
    ).to_json()


def results_table(result: CaseResult) -> dict[str, Any]:
    table = {}
    for s in result.subjects:
        table[s.implementation] = _result_entry(s)
        if s.shadow is not None:
            table[f"{s.implementation}@{s.shadow.interpreter}"] = _result_entry(s.shadow)
    return table


def _result_entry(s: SubjectResult) -> dict[str, Any]:
    return {
        "passed": s.passed,
        "backend": s.backend,
        "empty_rows": s.empty_rows,
        "error": s.error,
        "comparisons": [c.to_json() for c in s.comparisons],
        **({"located": s.located.to_json()} if s.located is not None else {}),
        **({"interpreter": s.interpreter} if s.interpreter is not None else {}),
        **({"replays": [r.to_json() for r in s.replays]} if s.replays else {}),
    }


def write_failure(out_dir: Path, result: CaseResult, check: Check, *, search: dict[str, Any] | None = None) -> Path:
    """Write DIR/failures/<id>.json: `result`, failed under `check`, and how it was found (`search`, Found JSON)."""
    doc = failure_document(
        result,
        kernel=implementation_spec(check.kernel),
        oracles=[implementation_spec(o) for o in check.oracles],
        grads=check.grads,
        interpret=check.interpret,
        time_limit=check.time_limit,
        search=search,
    )
    path = Path(out_dir) / "failures" / f"{doc['id']}.json"
    atomic_write_json(path, doc)
    return path


def write_divergence(
    out_dir: Path,
    result: CaseResult,
    subject: SubjectResult,
    *,
    kernel: contract.Implementation,
    oracles: list[contract.Implementation],
    grads: bool,
    interpret: compat.InterpretOptions = compat.DEFAULT_INTERPRET,
    time_limit: float | None = None,
) -> Path:
    """Write DIR/divergences/<id>.json for `subject`'s interpreter divergence on `result`: a failure file
    that replays the case under the interpreter that failed (the fast one)."""
    shadow = subject.shadow
    assert shadow is not None and shadow.interpreter is not None
    doc = failure_document(
        result,
        kernel=implementation_spec(kernel),
        oracles=[implementation_spec(o) for o in oracles],
        grads=grads,
        interpret=interpret,
        time_limit=time_limit,
    )
    doc["interpret"] = interpret.under(shadow.interpreter).to_json()
    doc["failure"] = divergence_line(subject)
    path = Path(out_dir) / "divergences" / f"{doc['id']}.json"
    atomic_write_json(path, doc)
    return path


class FailureFile:
    """A validated failure file: its record plus the objects it names."""

    def __init__(self, path: Path, record: FailureRecord) -> None:
        self.path = path
        self.record = record
        self.case = _field(path, "case", lambda: Case.from_json(record.case), CaseError)
        self.interpret = _field(
            path, "interpret", lambda: compat.InterpretOptions.from_json(record.interpret or {}), ValueError
        )
        self.kernel = _resolve(path, record.kernel, "kernel")
        self.oracles = [_resolve(path, spec, "oracle") for spec in record.oracles]
        _check(path, self.kernel, self.case, grads=record.grads)

    @property
    def doc(self) -> dict[str, Any]:
        """The record as the file's JSON."""
        return self.record.to_json()

    @property
    def grads(self) -> bool:
        return self.record.grads

    @property
    def time_limit(self) -> float | None:
        return self.record.time_limit

    @property
    def versions(self) -> dict[str, str | None]:
        return self.record.versions or {}

    @property
    def host(self) -> dict[str, str | None]:
        return self.record.host or {}

    @property
    def tolerance_version(self) -> int | None:
        return self.record.tolerance_version

    def retarget(self, kernel: str) -> None:
        """Replay against another kernel (a spec), which must accept the case."""
        self.kernel = _resolve(self.path, kernel, "kernel")
        _check(self.path, self.kernel, self.case, grads=self.grads)
        self.record = dataclasses.replace(self.record, kernel=kernel)


def _check(path: Path, kernel: contract.Implementation, case: Case, *, grads: bool) -> None:
    """FailureFileError when `case` is outside `kernel`'s contract (for a forward-only file, less what the
    library refuses only in the backward pass); CaseRefused when only because the installed release refuses it."""
    problems = kernel.violations(case)
    if not grads:
        problems = contract.forward_only(problems)
    if contract.refused(problems):
        raise CaseRefused(f"{path}: the installed release refuses the case ({kernel.name}): " + "; ".join(problems))
    if problems:
        raise FailureFileError(f"{path}: case outside {kernel.name}'s contract: " + "; ".join(problems))


def _field(path: Path, name: str, build: Any, errors: type[Exception]) -> Any:
    try:
        return build()
    except errors as e:
        raise FailureFileError(f"{path}: bad {name}: {e}") from None


def _resolve(path: Path, spec: str, role: str) -> contract.Implementation:
    try:
        impl = contract.resolve(spec)
    except contract.NotLoadedHere:
        raise  # a release without the kernel's module: cannot run here (exit 4), not a bad file
    except contract.UnknownImplementation as e:
        raise FailureFileError(f"{path}: {role} {spec!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - importing a MODULE:ATTR runs arbitrary code
        raise FailureFileError(f"{path}: {role} {spec!r} failed to load: {type(e).__name__}: {e}") from None
    if role == "oracle" and impl.role != "oracle":
        raise FailureFileError(f"{path}: oracle {spec!r} is a {impl.role}; oracles: {contract.names('oracle')}")
    return impl


def load_failure(path: Path | str) -> FailureFile:
    """Read and validate a failure file; FailureFileError (one line) for anything unusable."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise FailureFileError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise FailureFileError(f"{path} is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    try:
        record = FailureRecord.from_json(doc, str(path))
    except RecordError as e:
        raise FailureFileError(str(e)) from None
    return FailureFile(path, record)


def replay(ff: FailureFile, *, time_limit: float | None = None) -> CaseResult:
    """Run the recorded case through the recorded (or retargeted) kernel and oracles; a kernel that declares
    reproducible results is rerun whatever share a run reruns (harness.running.determinism)."""
    # In a worker process whatever the file says: a file written by an --in-process run has no time limit.
    limit = next((t for t in (time_limit, ff.time_limit) if t is not None), None) or default_time_limit()
    # Checked as a run checks it: under its upstream's declaration as the installed upstream refines it.
    subjects = [*exactness.refined([ff.kernel], lambda line: None), *ff.oracles]
    return run_case(ff.case, subjects, grads=ff.grads, time_limit=limit, interpret=ff.interpret, rerun_every=True)


def version_differences(recorded: dict[str, str | None]) -> list[str]:
    """'name recorded -> installed' for every library whose version changed."""
    installed = compat.library_versions()
    return [
        f"{name} {recorded[name]} -> {installed.get(name)}"
        for name in sorted(recorded)
        if recorded[name] != installed.get(name)
    ]


def iter_failure_files(directory: Path | str) -> Iterator[Path]:
    yield from sorted(Path(directory).glob("*.json"))
