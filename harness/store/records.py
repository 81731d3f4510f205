"""The stored records, one frozen class per kind, with their JSON round trip.

Writers build these and write `to_json()`; readers get them from `from_json` (through
harness.store.read), so a field is named in one place. Field names are the JSON keys, except
`pass_` (JSON "pass", a Python keyword). A case record's comparisons are typed
(harness.core.compare.Comparison), and so is its shadow (Shadow): readers use their attributes,
never a string key (tests/test_records_typed.py). Nested values that are JSON documents of their
own and are only passed on (a case, located errors) stay JSON here: the classes that own them
(harness.core.case.Case, harness.core.locate.Located) parse them where they are used, and a record whose
case no longer parses can still be listed; figures keyed by name (memory, cost, timing samples)
are mappings by design.

Records written by every release so far (schema 1) load; `from_json` fills fields that older
writers did not write with their defaults, and raises RecordError (one line) on a record it
cannot read: an unknown schema, a missing or mistyped field.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable
from typing import Any, ClassVar, Self

from harness.core import verdicts
from harness.core.compare import Comparison
from harness.core.summary import KernelSummary
from harness.core.verdicts import Replay
from harness.store.outline import Outline
from harness.store.schema import RECORD_SCHEMA, Kind, RecordError, RunStatus, check_schema

JSON = dict[str, Any]


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _json_key(name: str) -> str:
    return "pass" if name == "pass_" else name


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Record:
    """Fields shared by every kind; subclasses set KIND, REQUIRED (JSON key -> type) and SPARSE."""

    KIND: ClassVar[Kind]
    # Keys a reader cannot do without, with the JSON type each must have.
    REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {}
    # Keys written only when set (not None / False), as the writers always have.
    SPARSE: ClassVar[frozenset[str]] = frozenset()
    # JSON key -> the parser of a nested document typed by its own class, (value, where) -> object;
    # to_json writes the object back with its own to_json (a list: each item's).
    NESTED: ClassVar[dict[str, Callable[[Any, str], Any]]] = {}

    run_id: str
    time: str | None = None
    schema: int = RECORD_SCHEMA

    def to_json(self) -> JSON:
        out: JSON = {"kind": str(self.KIND)}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self.SPARSE and (value is None or value is False):
                continue
            key = _json_key(f.name)
            if key in self.NESTED and value is not None:
                value = [v.to_json() for v in value] if isinstance(value, list) else value.to_json()
            out[key] = value
        return out

    @classmethod
    def from_json(cls, doc: Any, where: str = "record") -> Self:
        doc = check_schema(doc, where)
        if doc.get("kind") != cls.KIND:
            raise RecordError(f"{where}: a {doc.get('kind')!r} record, expected {str(cls.KIND)!r}")
        required = {"run_id": str, **cls.REQUIRED}
        bad = [f"{k}={doc.get(k)!r}" for k, t in required.items() if not isinstance(doc.get(k), t)]
        if bad:
            want = ", ".join(f"{k} a {_type_name(t)}" for k, t in required.items())
            raise RecordError(f"{where}: {cls.KIND} record with {', '.join(bad)}; expected {want}")
        # Keys of this class only: a record from a newer writer with extra keys still reads.
        names = _names(cls)
        nested = cls.NESTED
        return cls(
            **{
                names[k]: nested[k](v, where) if k in nested and v is not None else v
                for k, v in doc.items()
                if k in names
            }
        )


@functools.cache
def _names(cls: type) -> dict[str, str]:
    """JSON key -> field name (computed once per class: a report reads thousands of records)."""
    return {_json_key(f.name): f.name for f in dataclasses.fields(cls)}


def _type_name(t: type | tuple[type, ...]) -> str:
    return " or ".join(x.__name__ for x in t) if isinstance(t, tuple) else t.__name__


@functools.cache
def _comparison_keys() -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(Comparison))


def _comparisons(doc: Any, where: str) -> list[Comparison]:
    """A list of Comparison JSON, parsed; keys of the class only (a newer writer's extra key still reads)."""
    if not isinstance(doc, list):
        raise RecordError(f"{where}: comparisons={doc!r}; expected a list of comparisons")
    keys = _comparison_keys()
    out = []
    for i, c in enumerate(doc):
        try:
            out.append(Comparison.from_json({k: v for k, v in c.items() if k in keys}))
        except (AttributeError, TypeError, ValueError) as e:
            raise RecordError(f"{where}: comparison {i} ({c!r}) does not read: {e}") from None
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shadow:
    """The same kernel on the same case under the other Pallas interpreter, where both ran: its
    verdict, its error, its comparisons (against the truth, and "<q>[vs faithful]" against the
    record's outputs) and its time. Stored as a case record's "shadow" object."""

    interpreter: str | None = None
    passed: bool = True
    error: str | None = None
    comparisons: list[Comparison] = dataclasses.field(default_factory=list)
    seconds: float | None = None

    def to_json(self) -> JSON:
        return {
            "interpreter": self.interpreter,
            "passed": self.passed,
            "error": self.error,
            "comparisons": [c.to_json() for c in self.comparisons],
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, doc: Any, where: str = "shadow") -> Shadow:
        if not isinstance(doc, dict):
            raise RecordError(f"{where}: shadow={doc!r}; expected an object")
        names = {f.name for f in dataclasses.fields(cls)}
        got = {k: v for k, v in doc.items() if k in names}
        if "comparisons" in got:
            got["comparisons"] = _comparisons(got["comparisons"] or [], f"{where} shadow")
        return cls(**got)


def _replays(doc: Any, where: str) -> list[Replay]:
    try:
        return list(verdicts.replays_from_json(doc))
    except ValueError as e:
        raise RecordError(f"{where}: {e}") from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CaseRecord(_Record):
    """One implementation on one case (STORE/records/<run_id>/<case_id>--<impl>.json)."""

    KIND = Kind.CASE
    REQUIRED = {"implementation": str, "case_id": str, "passed": bool, "comparisons": list}
    # exercised is left out only of records written before it existed (a list otherwise, [] included).
    SPARSE = frozenset({"shrunk", "failure_file", "located", "exercised", "interpreter", "shadow", "checks", "replays"})
    NESTED = {"comparisons": _comparisons, "shadow": Shadow.from_json, "replays": _replays}

    case_id: str
    implementation: str
    passed: bool
    comparisons: list[Comparison]  # one per quantity
    case: JSON | None = None  # harness.core.case.Case JSON
    role: str | None = None  # "kernel" or "oracle"
    backend: str | None = None
    device: str | None = None  # where it computed (harness.runtime.placement)
    native: JSON | None = None  # on an accelerator: harness.tpu.native timings and device memory
    digest: str | None = None  # a hash of the returned arrays, to the bit; None when it raised
    empty_rows: str | None = None
    error: str | None = None
    traceback: str | None = None
    seconds: float | None = None
    tolerance_version: int | None = None
    # The drawn API parameters the case exercised, "API.param" (harness.core.coverage.exercised);
    # None in records written before it existed.
    exercised: list[str] | None = None
    shrunk: bool = False  # the minimal failure Hypothesis shrank to
    failure_file: str | None = None  # its replayable failure file (harness.running.failures)
    located: JSON | None = None  # where its errors sit (harness.core.locate.Located JSON)
    # The Pallas interpreter that computed it (harness.runtime.compat.INTERPRETERS); None in records written
    # before there were two (those ran the faithful one: interpreted_by) and where none ran.
    interpreter: str | None = None
    # The same kernel under the other interpreter, where both ran; None where one ran.
    shadow: Shadow | None = None
    # The checks besides the comparison with the truth that ran (harness.core.coverage.CHECKS); None in
    # records written before it existed.
    checks: list[str] | None = None
    # Runs of the same case after it failed (harness.core.verdicts.Replay); None where none was made.
    replays: list[Replay] | None = None

    @property
    def flaky(self) -> bool:
        """A flaky failure (harness.core.verdicts): it passed when replayed under its own interpreter."""
        replays, changed = tuple(self.replays or ()), verdicts.changed(self.comparisons)
        return verdicts.flaky(self.passed, self.interpreted_by, replays, changed=changed)

    @property
    def interpreted_by(self) -> str | None:
        """The interpreter that computed it: records from before the field ran "tpu_interpret" faithfully."""
        if self.interpreter is not None:
            return self.interpreter
        return "faithful" if self.backend == "tpu_interpret" else None

    @property
    def divergence(self) -> bool:
        """An interpreter divergence (harness.running.runner.SubjectResult.divergence): never a kernel failure."""
        return self.passed and self.shadow is not None and not self.shadow.passed

    @property
    def dtype(self) -> str | None:
        """The case's dtype, read from its JSON (None when the case is not an object)."""
        return self.case.get("dtype") if isinstance(self.case, dict) else None

    @property
    def failing(self) -> list[Comparison]:
        """The comparisons past their bound."""
        return [c for c in self.comparisons if not c.passed]


class _Shaped:
    """A record measured at one benchmark shape, stored as {name, case}."""

    shape: JSON

    @property
    def shape_name(self) -> str:
        """The shape's name (harness.core.shapes); a shape stored as a bare name reads as that name."""
        return str(self.shape.get("name")) if isinstance(self.shape, dict) else str(self.shape)

    @property
    def shape_case(self) -> JSON | None:
        """The shape's harness.core.case.Case JSON; None when not recorded."""
        return self.shape.get("case") if isinstance(self.shape, dict) else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchRecord(_Shaped, _Record):
    """Timing samples of one implementation at one benchmark shape and pass (harness.tpu.bench)."""

    KIND = Kind.BENCH
    SPARSE = frozenset({"gc_disabled"})

    implementation: str | None = None
    backend: str | None = None  # "tpu_interpret" timings are never compared with "tpu" ones
    device: str | None = None
    note: str = ""
    timed: str | None = None  # "jit" or "run"
    shape: JSON = dataclasses.field(default_factory=dict)  # {name, case}
    pass_: str | None = None  # "fwd" or "fwd_bwd"
    passed: bool = True
    samples: list[Any] | None = None  # seconds, one per round
    stats: JSON = dataclasses.field(default_factory=dict)
    peak_rss_bytes: int | None = None
    device_peak_bytes: int | None = None  # None off an accelerator
    benchmark: str | None = None
    gc_disabled: bool | None = None  # Python's garbage collector off while timing (None: not recorded)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompileRecord(_Shaped, _Record):
    """One ahead-of-time TPU compile (harness.tpu.compile): memory and cost, or the error."""

    KIND = Kind.COMPILE
    SPARSE = frozenset({"times", "samples", "kernels", "deterministic", "kernels_error", "outline", "outline_error"})
    NESTED = {"outline": Outline.from_json}

    implementation: str | None = None
    backend: str = "tpu_compile_only"
    topology: str | None = None
    shape: JSON = dataclasses.field(default_factory=dict)  # {name, case}
    case_id: str | None = None
    pass_: str | None = None
    ok: bool = False
    passed: bool = False  # = ok
    error: str | None = None
    memory: JSON = dataclasses.field(default_factory=dict)  # argument, output, temp, generated_code, alias bytes
    cost: JSON = dataclasses.field(default_factory=dict)  # flops, bytes_accessed, transcendentals, optimal_seconds
    seconds: float | None = None
    failure_file: str | None = None
    # Left out of records written before they existed (None here).
    times: JSON | None = None  # trace, lower, compile: median seconds (harness.tpu.mosaic.STAGES)
    samples: JSON | None = None  # stage -> seconds, one per fresh process
    kernels: list[JSON] | None = None  # the Mosaic kernels, harness.tpu.mosaic.KernelBody.to_json()
    deterministic: bool | None = None  # False: fresh processes lowered different kernel bodies
    kernels_error: str | None = None  # why the kernels could not be read from the lowering
    outline: Outline | None = None  # the optimized program around the kernels (harness.store.outline)
    outline_error: str | None = None  # why the optimized program could not be outlined


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeakRecord(_Record):
    """One kernel called many times one way (harness.running.leak): per-call samples and their growth."""

    KIND = Kind.LEAK

    leak_schema: int | None = None
    implementation: str | None = None
    backend: str | None = None
    variant: str | None = None  # "fwd-run", "fwd_bwd-jit", ...
    pass_: str | None = None
    via: str | None = None
    case: JSON | None = None
    case_id: str | None = None
    calls: int = 0
    warmup_calls: int | None = None
    samples: dict[str, list[Any]] = dataclasses.field(default_factory=dict)  # series -> one value per call
    growth: list[JSON] = dataclasses.field(default_factory=list)  # {series, slope, limit, first, last}
    growing: list[str] = dataclasses.field(default_factory=list)  # one line per series past its limit
    passed: bool = False
    error: str | None = None
    seconds: float | None = None

    @property
    def series_growth(self) -> list[tuple[str, float, float]]:
        """(series, slope per call, limit) of each judged series (harness.running.leak.Growth); an entry
        that is not an object is left out."""
        return [
            (str(g.get("series")), float(g.get("slope", 0)), float(g.get("limit", 0)))
            for g in self.growth or []
            if isinstance(g, dict)
        ]


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunRecord(_Record):
    """A run's metadata (STORE/records/<run_id>/run.json): its environment, command and status.

    Each command adds its own fields (`run` its kernels, summary and placement; a matrix cell
    its cell name); those are kept in `more`, written beside the named ones.
    """

    KIND = Kind.RUN
    # run.json files differ by command: a field a command does not record is left out, not null.
    SPARSE = frozenset(
        {
            "time",
            "status",
            "command",
            "profile",
            "error",
            "interpret",
            "case_timeout",
            "conventions",
            "cannot_run",
            "api_parameters",
        }
    )

    status: str | None = None  # a RunStatus; None in run.json files written before it existed
    versions: JSON = dataclasses.field(default_factory=dict)
    machine: JSON = dataclasses.field(default_factory=dict)
    command: list[str] | str | None = None
    profile: str | None = None
    error: str | None = None  # why a run failed or stopped
    interpret: JSON | None = None  # harness.runtime.compat.InterpretOptions JSON
    case_timeout: float | None = None
    cannot_run: dict[str, str] | None = None  # `run`: kernel -> the interpreter's error
    conventions: dict[str, JSON] | None = None  # implementation -> its declared conventions
    # implementation -> wrapped API -> installed, drawn, present, absent, undeclared (harness.core.coverage);
    # None in run.json files written before it existed.
    api_parameters: dict[str, dict[str, JSON]] | None = None
    more: JSON = dataclasses.field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status == RunStatus.FINISHED

    @property
    def shard(self) -> str | None:
        """`run --shard I/N` (or a worker of `run --jobs`): "I/N"; None for a whole run."""
        value = self.more.get("shard")
        return value if isinstance(value, str) else None

    @property
    def jobs_parent(self) -> str | None:
        """The token of the `run --jobs` whose worker wrote this run; None for a run of its own."""
        value = self.more.get("jobs_parent")
        return value if isinstance(value, str) else None

    @property
    def summary(self) -> list[KernelSummary]:
        """`run`'s summary rows (harness.core.summary.KernelSummary); none for other commands."""
        return KernelSummary.rows_of(self.more.get("summary"))

    @property
    def traces(self) -> list[JSON]:
        """`profile`'s traces (harness.tpu.profile.ProfileResult JSON, one per trace); [] for other commands."""
        value = self.more.get("traces")
        return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []

    def field(self, key: str) -> Any:
        """A run.json field by name, named or not (run selectors match any of them)."""
        return self.to_json().get(key)

    def to_json(self) -> JSON:
        out = super().to_json()
        more = out.pop("more")
        return {**more, **out}

    @classmethod
    def from_json(cls, doc: Any, where: str = "record") -> Self:
        doc = check_schema(doc, where)
        names = {f.name for f in dataclasses.fields(cls)} - {"more"}
        rec = super().from_json(doc, where)
        return dataclasses.replace(rec, more={k: v for k, v in doc.items() if k not in names and k != "kind"})


RECORDS: dict[str, type[_Record]] = {
    cls.KIND: cls for cls in (RunRecord, CaseRecord, BenchRecord, CompileRecord, LeakRecord)
}
Record = RunRecord | CaseRecord | BenchRecord | CompileRecord | LeakRecord


def from_json(doc: Any, where: str = "record") -> Record:
    """The record `doc` holds, of the class its "kind" names; RecordError (one line) if it cannot be read."""
    doc = check_schema(doc, where)
    cls = RECORDS.get(doc.get("kind"))
    if cls is None:
        raise RecordError(f"{where}: unknown record kind {doc.get('kind')!r}; known: {tuple(map(str, RECORDS))}")
    return cls.from_json(doc, where)  # type: ignore[return-value]
