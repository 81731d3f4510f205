"""Batch invariance: one batch row (one sequence of a paged or ragged batch) computed alone returns what
it returned inside the whole batch.

flashinfer and vLLM require a sequence's output to be bitwise the same whatever else is in the batch
(deepseek-ai/FlashMLA#212: 1-2 ulp of batch dependence flips an argmax token). Each kernel declares it
(harness.core.contract.Conventions.batch_invariant: True, or why not); on a share of its cases with
batch > 1 (`wanted`) the runner runs one row alone, with the same interpreter, and compares each
quantity of that row: bitwise, except the quantities a kernel declares to vary (Conventions.batch_varies, all
where it names none), held to the bound the case's verdict used. A run refines the declaration from what the
installed upstream kernel does (harness.running.exactness): a quantity upstream keeps bitwise is checked bitwise.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.core.case import Case
from harness.core.compare import Comparison
from harness.core.contract import Implementation, Outputs
from harness.core.inputs import Inputs
from harness.core.rows import batch_row
from harness.running.execute import execute
from harness.runtime.compat import InterpretOptions

BATCH_INVARIANT = "batch_invariant"
# The row alone is a new program (batch 1), compiled once per shape: one case in ONE_IN (by case id,
# so the same cases every run) with batch > 1 is checked.
ONE_IN = 2
# Per batch row, on axis 0; dsinks sums over the batch rows, so it has no row of its own.
ROW_QUANTITIES = ("out", "dq", "dk", "dv", "dbias", "lse")


def wanted(impl: Implementation, case: Case, *, passed: bool) -> bool:
    """Whether to check a batch row of `impl`'s run of `case` alone (a kernel that passed, batch > 1)."""
    return impl.role == "kernel" and passed and case.batch > 1 and int(case.case_id, 16) % ONE_IN == 0


def row(case: Case) -> int:
    """The batch row checked: drawn from the case id, so the same every run."""
    return int(case.case_id, 16) // ONE_IN % case.batch


def _diff(a: np.ndarray | None, b: np.ndarray | None, rows: np.ndarray | None) -> float:
    if a is None or b is None:
        return 0.0 if a is None and b is None else np.inf
    if a.shape != b.shape:
        return np.inf
    if rows is not None and a.ndim >= 3:  # out [1, H, Lq, D] and lse [1, H, Lq]: rows that see a key
        a, b = a[rows], b[rows]
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        return 0.0 if same.all() else float(np.nan_to_num(np.abs(a - b)[~same].max(), nan=np.inf))


def comparison(full: Outputs, alone: Outputs | str, b: int, *, rows: np.ndarray, bounds: dict[str, float] | None):
    """Row b of the batch's results against the row alone; bounds None: bitwise (bound 0)."""
    if isinstance(alone, str):
        worst, value, bound, note = None, np.inf, 0.0, f"the row alone raised: {alone}"
    else:
        ratios = {}
        for q in ROW_QUANTITIES:
            got = full.get(q)
            d = _diff(None if got is None else got[b : b + 1], alone.get(q), rows if q in ("out", "lse") else None)
            limit = 0.0 if bounds is None else bounds.get(q, 0.0)
            ratios[q] = (d, limit)
        worst = max(ratios, key=lambda q: (ratios[q][0] > ratios[q][1], ratios[q][0] / (ratios[q][1] or 1.0)))
        value, bound = ratios[worst]
        held = sorted(q for q in ROW_QUANTITIES if bounds and q in bounds)
        rule = "bitwise" if not held else f"{', '.join(held)} within the tolerance, the rest bitwise"
        note = f"batch row {b} alone: {'the same' if value <= bound else 'differs'} ({rule}; worst {worst})"
    return Comparison(
        quantity=BATCH_INVARIANT,
        max_abs=value,
        max_rel=value,
        oracle_abs=0.0,
        ratio=value / bound if bound else (0.0 if value == 0 else np.inf),
        bound=bound,
        passed=value <= bound,
        note=note,
    )


def checked(
    impl: Implementation,
    case: Case,
    inputs: Inputs,
    subject,  # noqa: ANN001 - a runner.SubjectResult (runner imports this module)
    *,
    grads: bool,
    interpret: InterpretOptions,
    time_limit: float | None = None,
):  # noqa: ANN201 - the same SubjectResult, checked
    """`subject` (a runner.SubjectResult) with its batch row checked alone, where `wanted` and the row
    alone is inside the contract and runs (a megacore batch split needs an even batch, a batch tile
    the whole batch: then not checked).

    time_limit: as for the subject itself, the row runs in the kernel's worker process, killed past
    it; a row alone that crashes, exits or hangs the worker fails the subject (a kernel's fault,
    like any case's), while one the kernel refuses with an exception is not compared."""
    if subject.outputs is None or not wanted(impl, case, passed=subject.passed):
        return subject
    b = row(case)
    alone_case, one = batch_row(case, inputs, b)
    if impl.violations(alone_case):
        return subject
    interpret = interpret.under(subject.interpreter)  # the interpreter the verdict ran on
    if time_limit is None:
        ex = execute(impl, alone_case, one, grads=grads, interpret=interpret)
    else:
        from harness.running import worker  # starts a process: only when a time limit asks for one

        ex = worker.execute(impl, case, grads=grads, time_limit=time_limit, interpret=interpret, row=b)
    if ex.outputs is None and not ex.lost:
        # The kernel refuses the row alone (pallas_flash: block_b=2 > batch=1, which its adapter's
        # contract does not see): a configuration of the whole batch, not a result to compare.
        return subject
    varies = impl.conventions.varies(BATCH_INVARIANT)  # the quantities held to the tolerance, not bitwise
    bounds = {c.quantity: c.bound for c in subject.comparisons if c.quantity in varies} or None
    comp = comparison(subject.outputs, ex.error if ex.lost else ex.outputs, b, rows=~one.empty, bounds=bounds)
    # A lost worker says how it died, as the case's own crash would (its kind: "raised WorkerDied").
    lost = {"error": f"{ex.error} (batch row {b} alone)", "traceback": ex.traceback} if ex.lost else {}
    return dataclasses.replace(
        subject,
        **lost,
        comparisons=[*subject.comparisons, comp],
        passed=subject.passed and comp.passed,
        checks=[*subject.checks, BATCH_INVARIANT],
    )
