"""Every view of a bug (harness.store.bug.Bug), in one place: its title, its labelled rows, the block of text the
terminal, JUnit, the pytest plugin and `show` print, the `run --json` object, the HTML card's rows, and the one
line the verdict names it by. Pure: a Bug in, strings out.

Rows come from the value's fields: each field with a label (bug.shown) is a row of every view, shown by its
type (text, lines, yes/no) or by a formatter below where it needs one. A new field needs nothing here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Protocol

from harness.core import verdicts
from harness.core.compare import Comparison, oracle_multiple
from harness.core.numbers import multiple
from harness.store.bug import Bug, Table
from harness.store.counts import Counts

# Said under an error table where its "x oracle" column shows no multiple.
NO_MULTIPLE = (
    "x oracle: max_abs in units of the same-dtype oracle's error; '-' where that error is below the tolerance's "
    "floor (the floor sets the bound there; err/bound says how the case did)"
)


class Subject(Protocol):
    """What an error table reads: a live result (harness.running.runner.SubjectResult), a record or a Table."""

    implementation: str
    backend: Any
    empty_rows: Any
    error: str | None
    comparisons: Any


def _fmt(x: float) -> str:
    return f"{x:.2e}" if math.isfinite(x) else str(x)


def error_table(subject: Subject, dtype: str) -> str:
    """The error table of one implementation on one case of `dtype`: each error, the oracle's, the error as a
    multiple of the same-dtype oracle's ("x oracle", only where the oracle's error is above the tolerance's floor:
    compare.oracle_multiple), the bound, and the error as a share of it."""
    rows_said = f", empty rows declared {subject.empty_rows}" if subject.empty_rows is not None else ""
    head = f"  {subject.implementation} ({subject.backend}{rows_said})"
    if subject.error:
        return f"{head}\n    raised {subject.error}"
    rows = [
        f"{'quantity':<11} {'max_abs':>9} {'max_rel':>9} {'oracle':>9} {'x oracle':>8} {'bound':>9} "
        f"{'err/bound':>9}  verdict"
    ]
    blank = False
    for c in subject.comparisons:
        rows.append(_row(c, dtype, subject.implementation))
        blank |= oracle_multiple(c, dtype, subject.implementation) is None
    rows += [NO_MULTIPLE] if blank else []
    return head + "\n" + "\n".join("    " + r for r in rows)


def _row(c: Comparison, dtype: str, implementation: str) -> str:
    shown = oracle_multiple(c, dtype, implementation)
    ratio = f"{multiple(shown) if shown is not None else '-':>8}"
    used = f"{multiple(c.used) if not math.isnan(c.used) else '-':>9}"
    return (
        f"{c.quantity:<11} {_fmt(c.max_abs):>9} {_fmt(c.max_rel):>9} {_fmt(c.oracle_abs):>9} {ratio} "
        f"{_fmt(c.bound):>9} {used}  {'ok' if c.passed else 'FAIL'}{'  ' + c.note if c.note else ''}"
    )


def _tables(bug: Bug, tables: tuple[Table, ...]) -> str:
    out = []
    for t in tables:
        out += [f"  {t.implementation}: {verdicts.replay_line(t.interpreter, t.replays)}"] if t.flaky else []
        out.append(error_table(t, bug.dtype))
    return "\n".join(out)


# The fields whose text is more than their value, by name.
_FORMATS = {
    "tables": _tables,
    "finding": lambda bug, name: bug.finding_line or f"{name}{' (expected: --known)' if bug.expected else ''}",
    "inherited_from": lambda bug, base: (
        f"upstream {base}, as installed, fails this case the same way (a bug of {base}'s, not of this fork's edits)"
    ),
}


def _text(bug: Bug, name: str, value: Any) -> str:
    if name in _FORMATS:
        return _FORMATS[name](bug, value)
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, tuple | list):
        return "\n".join(map(str, value))
    return str(value)


def title(bug: Bug) -> str:
    """The bug in one heading: 'FAILURE kernel, shrunk to: case' ('on: case' where no search shrank it; its title
    fields, bug.shown(title=True))."""
    word = bug.verdict.upper()
    word = f"KNOWN FINDING {bug.finding}" if bug.finding else word
    return f"{word} {bug.kernel}, {'shrunk to' if bug.shrunk else 'on'}: {bug.shrunk_case}"


def rows(bug: Bug) -> list[tuple[str, str]]:
    """(label, text) of each labelled field that has a value, in field order; the title's fields apart."""
    out = []
    for f in dataclasses.fields(bug):
        label, value = f.metadata.get("label"), getattr(bug, f.name)
        if label is None or f.metadata.get("title") or value in (None, "", (), False):
            continue
        text = _text(bug, f.name, value)
        if text:
            out.append((label, text))
    return out


def text(bug: Bug) -> str:
    """The bug as a block of text: its title, then each row ('  label: text'; text of several lines under it)."""
    lines = [title(bug)]
    for label, said in rows(bug):
        if "\n" in said or label == "error table":
            lines.append(f"  {label}:")
            lines += [f"    {line}" if line.strip() else line for line in said.splitlines()]
        else:
            lines.append(f"  {label}: {said}")
    return "\n".join(lines)


def to_json(bug: Bug) -> dict[str, Any]:
    """The bug as `run --json` lists it: every field (bug.Bug.to_json)."""
    return bug.to_json()


def junit(bug: Bug) -> tuple[str, str, str]:
    """(message, type, text) of the bug's red JUnit testcase: why it failed, its verdict word, and its block."""
    return bug.failure, bug.verdict, text(bug)


def testcase_name(bug: Bug) -> str:
    """The bug's JUnit testcase: 'bug: TRIGGER [FILE]'."""
    stem = bug.file.rsplit("/", 1)[-1].removesuffix(".json") if bug.file else bug.case_id
    return f"bug: {bug.trigger or bug.shrunk_case} [{stem}]"


def line(bug: Bug, failing: int, drawn: int) -> str:
    """One bug as the verdict names it: kernel, finding, trigger in words, its kernel's failing cases of those
    drawn, the replay command."""
    trigger = bug.trigger or "not reduced to a trigger"
    known = f" (known finding {bug.finding}{', expected' if bug.expected else ''})" if bug.finding else ""
    cases = f"{failing} of {drawn} drawn case{'s' if drawn != 1 else ''} failed"
    return f"{bug.kernel}{known}: {trigger}; {cases}; replay: {bug.replay or 'no failure file'}"


def verdict_lines(counts: Counts) -> list[str]:
    """Each bug of `counts` in one line (`line`), kernel by kernel, as the verdict and the report's banner list them."""
    return [line(b, k.failing, k.drawn) for k in counts.kernels for b in k.bugs]
