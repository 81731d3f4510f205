"""One-line descriptions of records for the gate table and the report: case, failure, repro command."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

from harness.case import Case, CaseError


def case_text(case_json: Any) -> str:
    """The case as the console prints it, or its raw JSON when it no longer parses."""
    try:
        return str(Case.from_json(case_json))
    except (CaseError, TypeError, ValueError):
        return str(case_json)


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def failing_comparisons(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in rec.get("comparisons") or [] if not c.get("passed")]


def failure_line(rec: dict[str, Any]) -> str:
    """Why a case or compile record failed, in one line."""
    if rec.get("error"):
        return str(rec["error"]).strip().splitlines()[0] if str(rec["error"]).strip() else "raised"
    parts = []
    for c in failing_comparisons(rec):
        note = f" ({c['note']})" if c.get("note") else ""
        parts.append(f"{c.get('quantity')}: err {_num(c.get('max_abs')):.3g} > bound {_num(c.get('bound')):.3g}{note}")
    return "; ".join(parts) or "failed"


def used(comparison: dict[str, Any]) -> float:
    """max_abs / bound: the share of its tolerance a comparison used (above 1 fails); nan without a bound."""
    try:  # the hot path of a 10,000-record report: plain floats, or "inf"/"nan" strings
        err, bound = float(comparison["max_abs"]), float(comparison["bound"])
    except (KeyError, TypeError, ValueError):
        return math.nan
    if not math.isfinite(bound) or bound <= 0:
        return math.inf if math.isinf(err) else math.nan
    return err / bound


def failure_file(rec: dict[str, Any], roots: list[Path]) -> str | None:
    """The record's failure file as recorded, or where it now is in a merged store."""
    recorded = rec.get("failure_file")
    if not recorded:
        return None
    if Path(recorded).exists():
        return str(recorded)
    for root in roots:
        moved = Path(root) / "failures" / Path(recorded).name
        if moved.exists():
            return str(moved)
    return str(recorded)


def repro_command(path: str | None) -> str | None:
    return None if path is None else " ".join(shlex.quote(a) for a in ("python", "-m", "harness", "repro", path))


def compile_replay(rec: dict[str, Any]) -> str:
    """The command that repeats one compile check (what its compile failure file names as "replay")."""
    shape = rec.get("shape")
    shape = shape.get("name") if isinstance(shape, dict) else shape
    argv = ["python", "-m", "harness", "compile", "--kernel", str(rec.get("implementation"))]
    argv += ["--topology", str(rec.get("topology")), "--shape", str(shape), "--pass", str(rec.get("pass"))]
    return " ".join(shlex.quote(a) for a in argv)


def case_size(rec: dict[str, Any]) -> tuple[int, ...]:
    """A sort key: smaller cases first, as Hypothesis shrinks toward them."""
    c = rec.get("case") or {}
    keys = ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim")
    return tuple(int(c.get(k, 0) or 0) for k in keys)


Uses = dict[int, list[float]]  # id(case record) -> used() of each of its comparisons


def uses_of(cases: list[dict[str, Any]]) -> Uses:
    """used() of every comparison, once per record: the matrix, histograms and version table all need it."""
    return {id(r): [used(c) for c in r.get("comparisons") or []] for r in cases}


def record_uses(rec: dict[str, Any], uses: Uses | None) -> list[float]:
    """used() of each comparison of `rec`, from `uses` when it has them."""
    got = uses.get(id(rec)) if uses is not None else None
    return got if got is not None else [used(c) for c in rec.get("comparisons") or []]
