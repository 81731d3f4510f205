"""Everything derived from a stored record, defined once: labels, one-line reasons, commands.

The gate table, the report and the console all describe records through these, so a label or
a replay command reads the same wherever it is shown.
"""

from __future__ import annotations

import functools
import json
import math
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.core import verdicts
from harness.core.case import Case, CaseError
from harness.core.compare import Comparison
from harness.store.failures import FailureRecord, failure_from_json
from harness.store.records import CaseRecord, CompileRecord
from harness.store.schema import RecordError

Uses = dict[int, list[float]]  # id(case record) -> used() of each of its comparisons


def _case(case_json: Any) -> Case | None:
    try:
        return Case.from_json(case_json)
    except (CaseError, TypeError, ValueError, KeyError):
        return None


@functools.lru_cache(maxsize=4096)
def _mask_label(case_id: str, case_json_text: str) -> str:
    case = _case(json.loads(case_json_text))
    return case.mask_label if case is not None else "unreadable case"


def mask_label(rec: CaseRecord) -> str:
    """The case's mask label (Case.mask_label: every mask component, per-head ones and lengths
    included, and bias), or "unreadable case" when its JSON no longer parses."""
    if not isinstance(rec.case, dict):
        return "unreadable case"
    # Cached by the case's own text: thousands of records share a few hundred cases.
    return _mask_label(rec.case_id, json.dumps(rec.case, sort_keys=True))


def case_text(case_json: Any) -> str:
    """The case as the console prints it, or its raw JSON when it no longer parses."""
    case = _case(case_json)
    return str(case) if case is not None else str(case_json)


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def exceeded(quantity: str, max_abs: Any, bound: Any, note: str | None = None) -> str:
    """One comparison past its bound, in one line: "out: err 3.1e-05 > bound 1e-05 (note)"."""
    suffix = f" ({note})" if note else ""
    return f"{quantity}: err {_num(max_abs):.3g} > bound {_num(bound):.3g}{suffix}"


def failing_comparisons(rec: CaseRecord) -> list[Comparison]:
    return rec.failing


def reason(error: str | None, exceeding: Iterable[tuple[str, Any, Any, str | None]]) -> str:
    """Why a result failed, in one line: its error's first line, else each (quantity, max_abs,
    bound, note) past its bound. A live result (harness.running.runner) and its record read the same."""
    if error:
        return str(error).strip().splitlines()[0] if str(error).strip() else "raised"
    return "; ".join(exceeded(*c) for c in exceeding) or "failed"


def failure_line(rec: CaseRecord | CompileRecord) -> str:
    """Why a case or compile record failed, in one line."""
    if isinstance(rec, CompileRecord):
        return reason(rec.error, [])
    line = reason(rec.error, [(c.quantity, c.max_abs, c.bound, c.note) for c in rec.failing])
    changed = verdicts.changed(rec.comparisons)
    return line + verdicts.flaky_suffix(rec.passed, rec.interpreted_by, tuple(rec.replays or ()), changed=changed)


def interpreters_line(rec: CaseRecord) -> str:
    """Which Pallas interpreter computed the record and what the other saw where both ran; "" where none ran."""
    ran = rec.interpreted_by
    if ran is None:
        return ""
    if rec.shadow is None:
        return f"computed on the {ran} interpreter"
    shadow = rec.shadow
    why = reason(shadow.error, [(c.quantity, c.max_abs, c.bound, c.note) for c in shadow.comparisons if not c.passed])
    said = lambda passed, why: "passed" if passed else f"failed: {why}"  # noqa: E731
    return (
        f"on the {ran} interpreter {said(rec.passed, failure_line(rec))}; "
        f"on the {shadow.interpreter} interpreter {said(shadow.passed, why)}"
    )


def failure_file(rec: CaseRecord, roots: list[Path]) -> str | None:
    """The record's failure file as recorded, or where it now is in a merged store."""
    recorded = rec.failure_file
    if not recorded:
        return None
    if Path(recorded).exists():
        return str(recorded)
    for root in roots:
        moved = Path(root) / "failures" / Path(recorded).name
        if moved.exists():
            return str(moved)
    return str(recorded)


def failure_doc(rec: CaseRecord, roots: list[Path]) -> tuple[str | None, FailureRecord | None]:
    """The record's failure file (where it is now, in a merged store: failure_file) and its typed contents (None
    where there is none, it cannot be read, or it is another kind)."""
    path = failure_file(rec, roots)
    if path is None:
        return None, None
    try:
        doc = failure_from_json(json.loads(Path(path).read_text()), path)
    except (OSError, ValueError, RecordError):
        return path, None
    return path, doc if isinstance(doc, FailureRecord) else None


def _command(*argv: str) -> str:
    return " ".join(shlex.quote(a) for a in ("python", "-m", "harness", *argv))


def repro_command(path: str | None) -> str | None:
    """The command that replays a failure file."""
    return None if path is None else _command("repro", path)


def compile_command(*, kernel: str, topology: str, shape: str, pass_: str) -> str:
    """The command that repeats one compile check (what a compile failure file names as "replay")."""
    return _command("compile", "--kernel", kernel, "--topology", topology, "--shape", shape, "--pass", pass_)


def compile_replay(rec: CompileRecord) -> str:
    """compile_command for the check `rec` records."""
    return compile_command(
        kernel=str(rec.implementation), topology=str(rec.topology), shape=rec.shape_name, pass_=str(rec.pass_)
    )


def leak_command(kernel: str) -> str:
    """The command that repeats the leak check of one kernel."""
    return _command("leak", "--kernel", kernel)


def case_size(rec: CaseRecord) -> tuple[int, ...]:
    """A sort key: smaller cases first, as Hypothesis shrinks toward them."""
    c = rec.case or {}
    keys = ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim")
    return tuple(int(c.get(k, 0) or 0) for k in keys)


def uses_of(cases: list[CaseRecord]) -> Uses:
    """used() of every comparison, once per record: the matrix, histograms and version table all need it."""
    return {id(r): [c.used for c in r.comparisons] for r in cases}


def record_uses(rec: CaseRecord, uses: Uses | None) -> list[float]:
    """used() of each comparison of `rec`, from `uses` when it has them."""
    got = uses.get(id(rec)) if uses is not None else None
    return got if got is not None else [c.used for c in rec.comparisons]
