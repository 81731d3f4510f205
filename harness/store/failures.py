"""Failure files (STORE/failures/*.json), one frozen class per kind, with their JSON round trip.

  failure          a case that failed, replayable exactly (`python -m harness repro FILE`): written by
                   `run` (harness.running.failures), by the gate's drift replays (harness.gate.drift)
                   and by `pin`; FailureRecord
  compile_failure  an ahead-of-time compile that failed (harness.tpu.compile), with the command that
                   repeats it; CompileFailureRecord

Unlike the records under STORE/records, a failure file carries no run_id and has its own schema
number (harness.store.schema.FAILURE_SCHEMA). `from_json` is strict, as a replay must be: a missing,
unknown or mistyped field raises RecordError, one line naming the file and the field. Nested
documents (the case, interpreter options, results, how it was found) stay JSON here; their owners
parse them where they are used (harness.running.failures builds the Case and the implementations,
harness.store.bug.Found.of reads the search, as strictly).
"""

from __future__ import annotations

import dataclasses
import math
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
    search: JSON | None = None  # how it was found and what it is: harness.store.bug.Found's JSON (Found.of)
    pinned: JSON | None = None  # set by `pin`: time, source, found_with
    # The ISA XLA's CPU compiler targeted where it failed (harness.runtime.isa.describe: isa, host,
    # xla_cpu_max_isa); absent in files written before it was recorded, and from the gate's replays.
    host: dict[str, str | None] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "oracles", tuple(self.oracles))

    def failed_results(self) -> list[tuple[str, JSON]]:
        """(implementation, its results entry) of each result that failed, as the results table holds them."""
        return [
            (str(name), r) for name, r in (self.results or {}).items() if isinstance(r, dict) and not r.get("passed")
        ]

    def failed_located(self) -> list[tuple[str, JSON | None]]:
        """(implementation, its Located JSON or None) of each result that failed, as the results table holds them."""
        return [(name, r.get("located")) for name, r in self.failed_results()]

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
