"""The failure as one typed value: a bug (one root cause, one kept failure file), built by one pure function
from what its failure file holds (`Bug.of`), for every view to render (harness.store.bug_views: the terminal,
`run --json`, JUnit, the pytest plugin, the HTML report and `show`).

A field with `shown(label)` metadata is a row of every view, under that label; a field without is data only
(the JSON has it, no view prints it). A field with `searched(fact)` metadata is read from the failure file's
search section: `Found`, here too, declares each such fact with its JSON type (`fact`). So a field is added here,
with its label and where `Bug.of` reads it from; where the search computes it, its writer
(harness.running.settle) is the only other file (tests/test_failure_value.py holds both to that).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from harness.core import strips, verdicts
from harness.core.case import Case, CaseError
from harness.core.compare import Comparison
from harness.core.locate import Located
from harness.store.derive import case_text, reason, repro_command
from harness.store.failures import FailureRecord
from harness.store.schema import RecordError

JSON = dict[str, Any]


def shown(label: str, *, title: bool = False) -> dict[str, Any]:
    """A field's metadata: its label in every view; `title`: said in the failure's title line, not as a row."""
    return {"label": label, "title": title}


def searched(name: str) -> dict[str, Any]:
    """A field's metadata: `Bug.of` reads it from the failure file's search, the Found field `name`."""
    return {"fact": name}


def fact(ok: Callable[[Any], bool], want: str, default: Any = None) -> Any:
    """A Found field: its default (a file from before it lacks it), the check its JSON value must pass and what that
    value must be, in words (Found.from_json's error)."""
    return dataclasses.field(default=default, metadata={"ok": ok, "want": want})


def _str(value: Any) -> bool:
    return isinstance(value, str)


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _n_of_m(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"\d+ of \d+", value, re.ASCII) is not None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Found:
    """How a failure was found and what it is: a failure file's `search` (Found.of), as `run` writes it
    (harness.running.settle) and a `run --jobs` merge edits it (harness.running.jobs). Every field is optional:
    files from before a field existed lack it; `from_json` is strict about the type of what is there."""

    profile: str | None = fact(_str, "a profile name")
    cases: int | None = fact(_int, "an integer")  # the cases the search ran
    failure: str | None = fact(_n_of_m, '"N of M"')  # the search's failure N of its M distinct ones
    signature: str | None = fact(_str, "a string")
    # harness.running.signatures.Signature JSON: what a merge compares
    signature_parts: JSON | None = fact(lambda v: isinstance(v, dict), "a JSON object")
    shrunk: bool | None = fact(_bool, "true or false")  # False: reported unshrunk (past the cap)
    shrink_runs: int | None = fact(_int, "an integer")
    shrink_exhausted: bool | None = fact(_bool, "true or false")
    # Signatures of the search's other failures whose triggers nest in this one's.
    nests: tuple[str, ...] = fact(_strings, "a list of strings", ())
    # The features it cannot fail without; None: not reduced to one.
    trigger: tuple[str, ...] | None = fact(_strings, "a list of feature names")
    needs: tuple[str, ...] = fact(_strings, "a list of feature names", ())  # trigger features shown needed
    otherwise: tuple[str, ...] = fact(_strings, "a list of feature names", ())  # leaving them out failed otherwise
    trigger_words: str | None = fact(_str, "a string")  # the trigger as a maintainer reads it ("fails when: ...")
    finding: str | None = fact(_str, "a finding's name")  # the written-up finding it is (harness.running.known)
    finding_line: str | None = fact(_str, "a string")  # that finding in one line (known.Known.line)
    expected: bool = fact(_bool, "true or false", False)  # that finding was expected (run --known)
    # The built-in a drop-in derives from, which fails it alike.
    inherited_from: str | None = fact(_str, "a built-in kernel's name")
    # The kept file of the same bug (this file moved to failures/same-bug/).
    same_bug_as: str | None = fact(_str, "a failure file's name")
    # The same bug's other files (failures/same-bug/).
    also_found: tuple[JSON, ...] = fact(
        lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of JSON objects", ()
    )
    found_by: str | None = fact(_str, "a string")  # what wrote it, where not `run` (harness.api.check)
    # The built-in a drop-in kernel drops into (Implementation.drops_into).
    replaces: str | None = fact(_str, "a built-in kernel's name")
    # The failing drawn cases (in words) this failure explains (signatures.explains).
    explains: tuple[str, ...] = fact(_strings, "a list of cases in words", ())

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
    def from_json(cls, doc: Any, where: str = "failure file") -> Self:
        """The `search` object `doc`; RecordError (one line, naming `where` and the field) where it is not one."""
        if not isinstance(doc, dict):
            raise RecordError(f"{where}: search must be a JSON object, got {type(doc).__name__}")
        checks = {f.name: f.metadata for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - set(checks))
        if unknown:
            raise RecordError(f"{where}: unknown search fields {unknown}; known: {sorted(checks)}")
        for name, value in doc.items():
            if not checks[name]["ok"](value):
                raise RecordError(f"{where}: search field {name}={value!r} must be {checks[name]['want']}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()})

    @classmethod
    def of(cls, record: FailureRecord) -> Self | None:
        """How the failure `record` was found (its `search`, typed); None where its writer recorded none.
        RecordError where it is malformed."""
        return None if record.search is None else cls.from_json(record.search, f"failure of {record.kernel}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Table:
    """One failing implementation's error table on the bug's case, and where its errors sit."""

    implementation: str
    backend: str | None = None
    empty_rows: str | None = None  # its declared convention for fully masked rows; None in files from before it
    error: str | None = None
    comparisons: tuple[Comparison, ...] = ()
    located: Located | None = None
    interpreter: str | None = None  # the Pallas interpreter that computed it, where one did
    replays: tuple[verdicts.Replay, ...] = ()

    @property
    def flaky(self) -> bool:
        return verdicts.flaky(False, self.interpreter, self.replays, changed=verdicts.changed(self.comparisons))

    def to_json(self) -> JSON:
        return {
            "implementation": self.implementation,
            "backend": self.backend,
            "empty_rows": self.empty_rows,
            "error": self.error,
            "comparisons": [c.to_json() for c in self.comparisons],
            "located": self.located.to_json() if self.located is not None else None,
            "interpreter": self.interpreter,
            "replays": [r.to_json() for r in self.replays],
        }

    @classmethod
    def from_json(cls, doc: Any) -> Table:
        return cls(
            implementation=str(doc["implementation"]),
            backend=doc.get("backend"),
            empty_rows=doc.get("empty_rows"),
            error=doc.get("error"),
            comparisons=tuple(Comparison.from_json(c) for c in doc.get("comparisons") or ()),
            located=Located.from_json(doc.get("located")),
            interpreter=doc.get("interpreter"),
            replays=verdicts.replays_from_json(doc.get("replays") or []),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bug:
    """One root cause: its shrunk case, the kernel and what it replaces, the verdict word (harness.core.verdicts),
    the error table, where the error sits, its trigger in words, the finding it is, what upstream fails alike, the
    failing drawn cases it explains and the command that replays it."""

    kernel: str = dataclasses.field(metadata=shown("kernel", title=True))
    verdict: str = dataclasses.field(metadata=shown("verdict", title=True))  # failure or flaky failure
    shrunk_case: str = dataclasses.field(metadata=shown("shrunk case", title=True))
    # The built-in it drops into.
    replaces: str | None = dataclasses.field(default=None, metadata=shown("replaces") | searched("replaces"))
    # Why it failed, in one line: JUnit's message and the JSON's; the error table says it on a card.
    failure: str = "failed"
    finding: str | None = dataclasses.field(default=None, metadata=shown("known finding") | searched("finding"))
    expected: bool = dataclasses.field(default=False, metadata=searched("expected"))  # that finding was expected
    # The finding in one line: its title, note and proven fix (known.Known.line).
    finding_line: str | None = dataclasses.field(default=None, metadata=searched("finding_line"))
    # Its trigger in words: "fails when: ...".
    trigger: str | None = dataclasses.field(default=None, metadata=shown("trigger") | searched("trigger_words"))
    inherited_from: str | None = dataclasses.field(
        default=None, metadata=shown("inherited") | searched("inherited_from")
    )
    tables: tuple[Table, ...] = dataclasses.field(default=(), metadata=shown("error table"))
    where: tuple[str, ...] = dataclasses.field(default=(), metadata=shown("where the error sits"))
    explains: tuple[str, ...] = dataclasses.field(
        default=(), metadata=shown("failing drawn cases it explains") | searched("explains")
    )
    same_bug_as: str | None = dataclasses.field(default=None, metadata=shown("same bug as") | searched("same_bug_as"))
    replay: str | None = dataclasses.field(default=None, metadata=shown("replay"))
    file: str | None = None
    shrunk: bool = False  # its case is the one a search shrank it to (not a smoke case or a drawn one)
    case_id: str = ""
    case: JSON = dataclasses.field(default_factory=dict)  # the shrunk case (harness.core.case.Case JSON)

    @property
    def flaky(self) -> bool:
        return self.verdict == verdicts.Verdict.FLAKY_FAILURE

    @property
    def dtype(self) -> str:
        return str(self.case.get("dtype", ""))

    @classmethod
    def of(cls, record: FailureRecord, path: str | Path | None) -> Self:
        """The bug the failure file `record` (at `path`) holds, each `searched` field read from its search (Found).
        Pure; a file without search info (`pin`, the gate's replays, files from before it) is shown all the same."""
        found = _found(record)
        tables = _tables(record)
        flaky = bool(tables) and all(t.flaky for t in tables)
        path = None if path is None else str(path)
        return cls(
            kernel=record.kernel,
            verdict=str(verdicts.Verdict.FLAKY_FAILURE if flaky else verdicts.Verdict.FAILURE),
            shrunk_case=case_text(record.case),
            failure=record.failure or _reason(tables),
            tables=tables,
            where=tuple(line for t in tables for line in _where(t)),
            replay=repro_command(path),
            file=path,
            shrunk=found.shrunk is True,
            case_id=_case_id(record.case),
            case=record.case,
            **{f.name: getattr(found, f.metadata["fact"]) for f in dataclasses.fields(cls) if "fact" in f.metadata},
        )

    def to_json(self) -> JSON:
        out: JSON = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "tables":
                value = [t.to_json() for t in value]
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, doc: Any, where: str = "bug") -> Self:
        """The bug `doc` holds; RecordError (one line) for a missing or unknown field."""
        if not isinstance(doc, dict):
            raise RecordError(f"{where}: a bug is a JSON object, got {type(doc).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - set(fields))
        required = [
            n
            for n, f in fields.items()
            if dataclasses.MISSING is f.default and dataclasses.MISSING is f.default_factory
        ]
        missing = sorted(n for n in required if n not in doc)
        if unknown or missing:
            raise RecordError(f"{where}: unknown fields {unknown}, missing fields {missing}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()}
        if "tables" in values:
            values["tables"] = tuple(Table.from_json(t) for t in values["tables"])
        return cls(**values)


def _case_id(case: JSON) -> str:
    try:
        return Case.from_json(case).case_id
    except (CaseError, TypeError, ValueError, KeyError):
        return ""


def _found(record: FailureRecord) -> Found:
    try:
        return Found.of(record) or Found()
    except RecordError:
        return Found()


def _tables(record: FailureRecord) -> tuple[Table, ...]:
    """The failing implementations' results, as the file's results table holds them ("impl@interpreter": the same
    implementation under the other interpreter, a divergence's, not a table of its own)."""
    out = []
    for name, entry in record.failed_results():
        if "@" in name:
            continue
        try:
            out.append(Table.from_json({**entry, "implementation": name}))
        except (KeyError, TypeError, ValueError):
            out.append(Table(implementation=name, error="unreadable results entry"))
    return tuple(out)


def _reason(tables: tuple[Table, ...]) -> str:
    """Why the tables failed, in one line, where the file does not say (derive.reason)."""
    past = lambda t: [(c.quantity, c.max_abs, c.bound, c.note) for c in t.comparisons if not c.passed]  # noqa: E731
    return " | ".join(f"{t.implementation}: {reason(t.error, past(t))}" for t in tables) or "failed"


def _where(table: Table) -> list[str]:
    """Where `table`'s errors sit, as lines of text (harness.core.strips.summary); none where nothing is located."""
    text = strips.summary(table.located, indent="")
    return text.splitlines()
