"""The upgrade gate: a candidate environment's records against a baseline's. Pure: records in, rows out.

A row is one thing compared (an implementation's cases, one compile check, one compiled
figure, one benchmark) with a status: "worse" fails the gate (a kernel the baseline ran and
the candidate cannot run is "worse": lost); "better", "unchanged" and "new" do not;
"insufficient" (too few timing samples) and "missing" (in the baseline, absent from the
candidate) fail only as harness/gate/gate_thresholds.toml says; "incomparable" (timed on
different backends) and "not compared" (a kernel the interpreter cannot run on either side,
with the reason) never do; "incomplete" (a side's records are unreadable, or one of its runs
did not finish) always does. Each row falls in one `Group` (regressions, improvements, new,
not compared, within noise), which the summary line and the report count alike.
`format_table` prints the rows.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from harness.gate import drift, forks, machines
from harness.gate.codegen import CodegenChange, codegen_changes, codegen_rows
from harness.gate.compiled import compile_rows, compile_time_rows
from harness.gate.correctness import cannot_run_row, correctness_rows
from harness.gate.leaks import incomplete_rows, leak_rows
from harness.gate.numerics import drift_rows
from harness.gate.outline import outline_rows
from harness.gate.result import GateResult
from harness.gate.rows import CATEGORIES, GROUPS, STATUSES, Group, Row, Status, fmt_seconds
from harness.gate.speed import SpeedComparison, compare_family, compare_samples, process_samples, speed_rows
from harness.gate.thresholds import Thresholds
from harness.store.read import Records

__all__ = [
    "CATEGORIES",
    "GROUPS",
    "STATUSES",
    "CodegenChange",
    "GateResult",
    "Group",
    "Row",
    "SpeedComparison",
    "Status",
    "cannot_run_row",
    "codegen_changes",
    "codegen_rows",
    "compare",
    "compare_family",
    "compare_samples",
    "compile_rows",
    "compile_time_rows",
    "correctness_rows",
    "drift_rows",
    "fmt_seconds",
    "format_table",
    "incomplete_rows",
    "leak_rows",
    "outline_rows",
    "process_samples",
    "speed_rows",
]


def compare(
    base: Records,
    cand: Records,
    th: Thresholds,
    *,
    labels: tuple[str, str] = ("baseline", "candidate"),
    one_machine: bool = False,
) -> GateResult:
    """Every row of the candidate against the baseline. one_machine: timings are compared only where both
    sides' runs name the same host (harness.gate.machines), as upgrade's sides run as separate jobs need."""
    # A fork on one side against the built-in it replaces on the other: paired as one kernel.
    named = {**forks.pairs(base, cand), **forks.pairs(cand, base)}
    base, cand = forks.as_upstream(base, forks.pairs(cand, base)), forks.as_upstream(cand, forks.pairs(base, cand))
    pairs = drift.with_replays(drift.pair(base.cases, cand.cases), [*cand.roots, *base.roots])
    timings = speed_rows(base, cand, th) + compile_time_rows(base, cand, th)
    if one_machine:
        timings = machines.timing_rows_across(timings, base, cand)
    rows = correctness_rows(base, cand, th) + compile_rows(base, cand, th) + timings
    changes = codegen_changes(base, cand)
    rows += codegen_rows(changes, base, cand, rows)
    rows += drift_rows(pairs, th)
    rows += leak_rows(base, cand)
    rows += outline_rows(base, cand)
    if rows:  # with nothing compared the gate is "NOTHING COMPARED" (bad input), never PASS either way
        rows += incomplete_rows(base, cand)
    rows = [dataclasses.replace(r, subject=forks.labelled(r.subject, named)) for r in rows] if named else rows
    order = {s: i for i, s in enumerate(STATUSES)}
    rows.sort(key=lambda r: (not r.fails, order[r.status], CATEGORIES.index(r.category), r.subject))
    return GateResult(
        baseline=labels[0], candidate=labels[1], thresholds=th.source, rows=rows, drift=pairs, codegen=changes
    )


def format_table(result: GateResult, *, verbose: bool = False) -> str:  # pragma: no mutate block
    """The compact table: every row that is not unchanged (all with verbose), then a count of the rest."""
    shown = [r for r in result.rows if verbose or r.status != Status.UNCHANGED]
    lines = [f"gate: baseline {result.baseline}  vs  candidate {result.candidate}  (thresholds: {result.thresholds})"]
    if shown:
        w = max(len(r.subject) for r in shown)
        w = min(max(w, 7), 72)
        head = f"{'category':<12} {'status':<12} {'subject':<{w}} {'baseline':>22} {'candidate':>22}  change"
        lines += [head, "-" * len(head)]
        for r in shown:
            status = r.status.upper() if r.fails else r.status
            subject = r.subject if len(r.subject) <= w else r.subject[: w - 3] + "..."
            lines.append(f"{r.category:<12} {status:<12} {subject:<{w}} {r.baseline:>22} {r.candidate:>22}  {r.change}")
            if r.detail and (r.fails or verbose or r.group == Group.NOT_COMPARED):
                lines.append(f"{'':<12} -> {r.detail}")
    unchanged = defaultdict(int)
    for r in result.rows:
        if r.status == Status.UNCHANGED:
            unchanged[r.category] += 1
    if unchanged and not verbose:
        lines.append("unchanged: " + ", ".join(f"{c} {unchanged[c]}" for c in CATEGORIES if unchanged[c]))
    lines.append(result.summary())
    return "\n".join(lines)
