"""Failure files (STORE/failures/*.json), one frozen class per kind, with their JSON round trip.

  failure          a case that failed, replayable exactly (`python -m harness repro FILE`): written by
                   `run` (harness.running.failures), by the gate's drift replays (harness.gate.drift)
                   and by `pin`; FailureRecord
  compile_failure  an ahead-of-time compile that failed (harness.tpu.compile), with the command that
                   repeats it; CompileFailureRecord

Unlike the records under STORE/records, a failure file carries no run_id and has its own schema
number (harness.store.schema.FAILURE_SCHEMA). `from_json` is strict, as a replay must be: a missing,
unknown or mistyped field raises RecordError, one line naming the file and the field. Nested
documents (the case, interpreter options, results) stay JSON here; their owners parse them where
they are used (harness.running.failures builds the Case and the implementations).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, ClassVar, Self

from harness.store.schema import COMPILE_FAILURE_SCHEMA, FAILURE_SCHEMA, RecordError

JSON = dict[str, Any]


def _json_key(name: str) -> str:
    return "pass" if name == "pass_" else name


@dataclasses.dataclass(frozen=True, kw_only=True)
class _FailureFile:
    """What every failure file holds; subclasses set KIND, REQUIRED, SPARSE and check their types."""

    KIND: ClassVar[str]
    # Keys a file cannot do without.
    REQUIRED: ClassVar[tuple[str, ...]]
    # Keys written only when set (not None), as their writers always have.
    SPARSE: ClassVar[frozenset[str]] = frozenset()

    schema: int = FAILURE_SCHEMA

    def to_json(self) -> JSON:
        out: JSON = {"kind": self.KIND}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self.SPARSE and value is None:
                continue
            out[_json_key(f.name)] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, doc: Any, where: str = "failure file") -> Self:
        """The file `doc` holds; RecordError (one line, naming `where`) for anything a replay cannot use."""
        if not isinstance(doc, dict):
            raise RecordError(f"{where}: a failure file is a JSON object, got {type(doc).__name__}")
        required = ("schema", "kind", *cls.REQUIRED)
        missing = [k for k in required if k not in doc]
        if missing:
            raise RecordError(f"{where}: missing fields {missing}")
        known = {"kind"} | {_json_key(f.name) for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise RecordError(f"{where}: unknown fields {unknown}; known: {sorted(known)}")
        if doc["kind"] != cls.KIND:
            raise RecordError(f"{where}: field kind={doc['kind']!r} must be {cls.KIND!r}")
        supported = next(f.default for f in dataclasses.fields(cls) if f.name == "schema")
        if doc["schema"] != supported:
            raise RecordError(
                f"{where}: schema={doc['schema']!r} is not supported; this harness reads {cls.KIND} schema {supported}"
            )
        for name, ok, want in cls._types(doc):
            if name in doc and not ok:
                raise RecordError(f"{where}: field {name}={doc[name]!r} must be {want}")
        names = {_json_key(f.name): f.name for f in dataclasses.fields(cls)}
        return cls(**{names[k]: v for k, v in doc.items() if k != "kind"})

    @classmethod
    def _types(cls, doc: JSON) -> list[tuple[str, bool, str]]:
        """(field, whether its value has the right type, what it must be) for each field present."""
        return []


def _optional_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _positive_seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value > 0


def _versions(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(_optional_str(v) for v in value.values()))


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int)


# A Found field's JSON type check and what it must be, per field.
_FOUND_TYPES: dict[str, tuple[Any, str]] = {
    "profile": (lambda v: isinstance(v, str), "a profile name"),
    "cases": (_int, "an integer"),
    "failure": (lambda v: isinstance(v, str), '"N of M"'),
    "signature": (lambda v: isinstance(v, str), "a string"),
    "signature_parts": (lambda v: isinstance(v, dict), "a JSON object"),
    "shrunk": (lambda v: isinstance(v, bool), "true or false"),
    "shrink_runs": (_int, "an integer"),
    "shrink_exhausted": (lambda v: isinstance(v, bool), "true or false"),
    "nests": (_strings, "a list of strings"),
    "trigger": (_strings, "a list of feature names"),
    "needs": (_strings, "a list of feature names"),
    "otherwise": (_strings, "a list of feature names"),
    "trigger_words": (lambda v: isinstance(v, str), "a string"),
    "finding": (lambda v: isinstance(v, str), "a finding's name"),
    "finding_line": (lambda v: isinstance(v, str), "a string"),
    "expected": (lambda v: isinstance(v, bool), "true or false"),
    "inherited_from": (lambda v: isinstance(v, str), "a built-in kernel's name"),
    "same_bug_as": (lambda v: isinstance(v, str), "a failure file's name"),
    "also_found": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of JSON objects"),
    "found_by": (lambda v: isinstance(v, str), "a string"),
    "replaces": (lambda v: isinstance(v, str), "a built-in kernel's name"),
    "explains": (_strings, "a list of cases in words"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Found:
    """How a failure was found and what it is: a failure file's `search` (FailureRecord.found), as `run` writes it
    (harness.running.settle) and a `run --jobs` merge edits it (harness.running.jobs). Every field is optional:
    files from before a field existed lack it; `from_json` is strict about the type of what is there."""

    profile: str | None = None
    cases: int | None = None  # the cases the search ran
    failure: str | None = None  # "N of M": the search's failure N of its M distinct ones
    signature: str | None = None
    signature_parts: JSON | None = None  # harness.running.signatures.Signature JSON: what a merge compares
    shrunk: bool | None = None  # False: reported unshrunk (past the cap); absent in files from before it
    shrink_runs: int | None = None
    shrink_exhausted: bool | None = None
    nests: tuple[str, ...] = ()  # signatures of the search's other failures whose triggers nest in this one's
    trigger: tuple[str, ...] | None = None  # the features it cannot fail without; None: not reduced to one
    needs: tuple[str, ...] = ()  # trigger features shown needed (the same case without each passed)
    otherwise: tuple[str, ...] = ()  # trigger features whose leaving out failed another way
    trigger_words: str | None = None  # the trigger as a maintainer reads it ("fails when: ...")
    finding: str | None = None  # the written-up finding it is (harness.running.known)
    finding_line: str | None = None  # that finding in one line: title, note, proven fix (known.Known.line)
    expected: bool = False  # that finding was expected (run --known)
    inherited_from: str | None = None  # the built-in a drop-in derives from, which fails it alike
    same_bug_as: str | None = None  # the kept file of the same bug (this file moved to failures/same-bug/)
    also_found: tuple[JSON, ...] = ()  # the same bug's other files (failures/same-bug/)
    found_by: str | None = None  # what wrote it, where not `run` (harness.api.check)
    replaces: str | None = None  # the built-in a drop-in kernel drops into (Implementation.drops_into)
    explains: tuple[str, ...] = ()  # the failing drawn cases (in words) this failure explains (signatures.explains)

    @property
    def order(self) -> int:
        """N of "N of M": its place among its search's failures (1 where not recorded)."""
        return int((self.failure or "1 of 1").split()[0])

    def to_json(self) -> JSON:
        out: JSON = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            # Left out where unset; an empty trigger (the plainest case) is a trigger, kept.
            if value is None or (value == () and f.default == ()) or (f.name == "expected" and not value):
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, doc: Any, where: str = "failure file") -> Found:
        """The `search` object `doc`; RecordError (one line, naming `where` and the field) where it is not one."""
        if not isinstance(doc, dict):
            raise RecordError(f"{where}: search must be a JSON object, got {type(doc).__name__}")
        unknown = sorted(set(doc) - set(_FOUND_TYPES))
        if unknown:
            raise RecordError(f"{where}: unknown search fields {unknown}; known: {sorted(_FOUND_TYPES)}")
        for name, value in doc.items():
            ok, want = _FOUND_TYPES[name]
            if not ok(value):
                raise RecordError(f"{where}: search field {name}={value!r} must be {want}")
        if "failure" in doc and not re.fullmatch(r"\d+ of \d+", doc["failure"], re.ASCII):
            raise RecordError(f'{where}: search field failure={doc["failure"]!r} must be "N of M"')
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()})


@dataclasses.dataclass(frozen=True, kw_only=True)
class FailureRecord(_FailureFile):
    """A replayable failure (kind "failure"): everything a replay needs, and what the failure looked like."""

    KIND = "failure"
    REQUIRED = ("kernel", "oracles", "grads", "case")
    # Left out by the writers that do not know them: the gate's drift replays write no created,
    # tolerance_version or search, `run` writes no pinned.
    SPARSE = frozenset({"created", "tolerance_version", "results", "search", "pinned", "host"})

    kernel: str  # a spec as harness.core.contract.resolve reads it: a built-in name or MODULE:ATTR
    oracles: tuple[str, ...]
    grads: bool  # whether the backward pass ran
    case: JSON  # harness.core.case.Case JSON, block sizes included
    id: str | None = None
    created: str | None = None
    interpret: JSON | None = None  # harness.runtime.compat.InterpretOptions JSON
    time_limit: float | None = None  # per-subject seconds
    tolerance_version: int | None = None  # harness.core.compare.TOLERANCE_VERSION when it failed
    versions: dict[str, str | None] | None = None  # library -> version where it failed
    failure: str | None = None  # one line: why it failed
    # implementation -> passed, backend, error, comparisons, and on a failure "located"
    # (harness.core.locate.Located JSON; absent in files written before it existed).
    results: dict[str, JSON] | None = None
    search: JSON | None = None  # how it was found and what it is: Found's JSON (read it with found())
    pinned: JSON | None = None  # set by `pin`: time, source, found_with
    # The ISA XLA's CPU compiler targeted where it failed (harness.runtime.isa.describe: isa, host,
    # xla_cpu_max_isa); absent in files written before it was recorded, and from the gate's replays.
    host: dict[str, str | None] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "oracles", tuple(self.oracles))

    def found(self) -> Found | None:
        """How it was found (its `search`, typed); None where the writer recorded none. RecordError where malformed."""
        return None if self.search is None else Found.from_json(self.search, f"failure of {self.kernel}")

    def failed_located(self) -> list[tuple[str, JSON | None]]:
        """(implementation, its Located JSON or None) of each result that failed, as the results table holds them."""
        return [
            (str(name), r.get("located"))
            for name, r in (self.results or {}).items()
            if isinstance(r, dict) and not r.get("passed")
        ]

    @classmethod
    def _types(cls, doc: JSON) -> list[tuple[str, bool, str]]:
        limit, tv = doc.get("time_limit"), doc.get("tolerance_version")
        return [
            ("kernel", isinstance(doc.get("kernel"), str) and bool(doc.get("kernel")), "a kernel name or MODULE:ATTR"),
            (
                "oracles",
                isinstance(doc.get("oracles"), list) and all(isinstance(o, str) for o in doc["oracles"]),
                "a list of oracle names",
            ),
            ("grads", isinstance(doc.get("grads"), bool), "true or false"),
            ("case", isinstance(doc.get("case"), dict), "a case (a JSON object)"),
            ("time_limit", limit is None or _positive_seconds(limit), "a positive number of seconds or null"),
            ("tolerance_version", tv is None or (not isinstance(tv, bool) and isinstance(tv, int)), "an integer"),
            ("versions", _versions(doc.get("versions")), "an object of library name to version string"),
            ("host", _versions(doc.get("host")), "an object of strings or nulls (isa, host, xla_cpu_max_isa)"),
            ("interpret", doc.get("interpret") is None or isinstance(doc.get("interpret"), dict), "a JSON object"),
            ("results", doc.get("results") is None or isinstance(doc.get("results"), dict), "a JSON object"),
            ("id", _optional_str(doc.get("id")), "a string"),
            ("failure", _optional_str(doc.get("failure")), "a string"),
        ]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompileFailureRecord(_FailureFile):
    """A compile that failed (kind "compile_failure"), and the command that repeats it."""

    KIND = "compile_failure"
    REQUIRED = ("kernel", "topology", "shape", "pass", "case", "error", "replay")

    schema: int = COMPILE_FAILURE_SCHEMA

    kernel: str
    topology: str
    shape: str  # a harness.core.shapes name
    pass_: str  # "fwd" or "fwd_bwd"
    case: JSON
    error: str  # the compiler's one-line error
    replay: str  # the `python -m harness compile ...` command (harness.store.derive.compile_command)
    created: str | None = None
    traceback: str | None = None
    versions: dict[str, str | None] | None = None

    @classmethod
    def _types(cls, doc: JSON) -> list[tuple[str, bool, str]]:
        strings = ("kernel", "topology", "shape", "pass", "error", "replay")
        return [(k, isinstance(doc.get(k), str), "a string") for k in strings] + [
            ("case", isinstance(doc.get("case"), dict), "a case (a JSON object)"),
            ("versions", _versions(doc.get("versions")), "an object of library name to version string"),
        ]


FAILURE_KINDS: dict[str, type[_FailureFile]] = {cls.KIND: cls for cls in (FailureRecord, CompileFailureRecord)}
AnyFailure = FailureRecord | CompileFailureRecord


def failure_from_json(doc: Any, where: str = "failure file") -> AnyFailure:
    """The failure file `doc` holds, of the class its "kind" names; RecordError (one line) otherwise."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    cls = FAILURE_KINDS.get(kind, FailureRecord)  # an unknown kind: FailureRecord says what is wrong
    return cls.from_json(doc, where)  # type: ignore[return-value]
