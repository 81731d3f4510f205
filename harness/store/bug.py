"""The failure as one typed value: a bug (one root cause, one kept failure file), built by one pure function
from what its failure file holds (`Bug.of`), for every view to render (harness.store.bug_views: the terminal,
`run --json`, JUnit, the pytest plugin, the HTML report and `show`).

A field with `shown(label)` metadata is a row of every view, under that label; a field without is data only
(the JSON has it, no view prints it). Adding a field is adding it here, with its label and where `Bug.of` reads
it from; where the failure file does not hold it yet, its writer (harness.running.settle) is the second file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Self

from harness.core import strips, verdicts
from harness.core.case import Case, CaseError
from harness.core.compare import Comparison
from harness.core.locate import Located
from harness.store.derive import case_text, reason, repro_command
from harness.store.failures import FailureRecord, Found
from harness.store.schema import RecordError

JSON = dict[str, Any]


def shown(label: str, *, title: bool = False) -> dict[str, Any]:
    """A field's metadata: its label in every view; `title`: said in the failure's title line, not as a row."""
    return {"label": label, "title": title}


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
    replaces: str | None = dataclasses.field(default=None, metadata=shown("replaces"))  # the built-in it drops into
    # Why it failed, in one line: JUnit's message and the JSON's; the error table says it on a card.
    failure: str = "failed"
    finding: str | None = dataclasses.field(default=None, metadata=shown("known finding"))
    expected: bool = False  # that finding was expected (run --known)
    finding_line: str | None = None  # the finding in one line: its title, note and proven fix (known.Known.line)
    trigger: str | None = dataclasses.field(default=None, metadata=shown("trigger"))  # "fails when: ..."
    inherited_from: str | None = dataclasses.field(default=None, metadata=shown("inherited"))
    tables: tuple[Table, ...] = dataclasses.field(default=(), metadata=shown("error table"))
    where: tuple[str, ...] = dataclasses.field(default=(), metadata=shown("where the error sits"))
    explains: tuple[str, ...] = dataclasses.field(default=(), metadata=shown("failing drawn cases it explains"))
    same_bug_as: str | None = dataclasses.field(default=None, metadata=shown("same bug as"))
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
        """The bug the failure file `record` (at `path`) holds. Pure; a file without search info (`pin`, the gate's
        replays, files from before it) is shown all the same."""
        found = _found(record)
        tables = _tables(record)
        flaky = bool(tables) and all(t.flaky for t in tables)
        path = None if path is None else str(path)
        return cls(
            kernel=record.kernel,
            verdict=str(verdicts.Verdict.FLAKY_FAILURE if flaky else verdicts.Verdict.FAILURE),
            shrunk_case=case_text(record.case),
            replaces=found.replaces,
            failure=record.failure or _reason(tables),
            finding=found.finding,
            expected=found.expected,
            finding_line=found.finding_line,
            trigger=found.trigger_words,
            inherited_from=found.inherited_from,
            tables=tables,
            where=tuple(line for t in tables for line in _where(t)),
            explains=found.explains,
            same_bug_as=found.same_bug_as,
            replay=repro_command(path),
            file=path,
            shrunk=found.shrunk is True,
            case_id=_case_id(record.case),
            case=record.case,
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
        return record.found() or Found()
    except RecordError:
        return Found()


def _tables(record: FailureRecord) -> tuple[Table, ...]:
    """The failing implementations' results, as the file's results table holds them ("impl@interpreter": the same
    implementation under the other interpreter, a divergence's, not a table of its own)."""
    out = []
    for name, entry in (record.results or {}).items():
        if "@" in name or not isinstance(entry, dict) or entry.get("passed"):
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
