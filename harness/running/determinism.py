"""Run-to-run reproducibility: a kernel's case run again on fresh copies of its inputs returns the same bits.

tokamax's attention tests rerun every case and require bitwise-equal outputs and gradients
(`test_deterministic=True`); FlashAttention reruns its backward 1000 times. Here each kernel declares it
per quantity (harness.core.contract.Conventions.reproducible: True, or the reason not and the quantities
it is about, rerun_varies), as a run refines it from the installed upstream kernel's own behaviour
(harness.running.exactness); the runner reruns a share of its cases (`wanted`): a difference in any bit
of a quantity declared exact fails the case as its own kind of failure (the REPRODUCIBLE row of the error
table, bound 0), whose failure file replays it (`python -m harness repro FILE` reruns every case).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.core import verdicts
from harness.core.case import Case
from harness.core.compare import Comparison, exact_zero
from harness.core.contract import QUANTITIES, Implementation, Outputs
from harness.core.inputs import Inputs

# The quantity of the comparison row, and the check's name in the records (CaseRecord.checks).
REPRODUCIBLE = verdicts.RERUN
# Every case is rerun except on the faithful Pallas TPU interpreter, which simulates the TPU step by
# step: a reused program costs ~0.8 CPU s a forward there against ~0.04 on the fast interpreter and
# ~0.01 in plain XLA (benchmarks/interpreters.py), and the smoke cases all run on it. There one case in
# FAITHFUL_ONE_IN (by case id, so the same cases every run) is rerun; `repro` reruns every case.
FAITHFUL_ONE_IN = 8


def declared(impl: Implementation) -> bool:
    """Whether `impl` declares any quantity bitwise reproducible (kernels only: the oracles are the judges)."""
    return impl.role == "kernel" and bool(set(QUANTITIES) - set(impl.conventions.varies(REPRODUCIBLE)))


def bounds(impl: Implementation, comparisons: list[Comparison]) -> dict[str, float]:
    """The bound of each quantity `impl` declares may vary on a rerun (Conventions.rerun_varies): the one its
    verdict used; every other quantity is held to the bit."""
    varies = impl.conventions.varies(REPRODUCIBLE)
    return {c.quantity: c.bound for c in comparisons if c.quantity in varies}


def wanted(impl: Implementation, case: Case, interpreter: str | None, *, every: bool = False) -> bool:
    """Whether this run of `impl` on `case` under `interpreter` (None: none) is rerun; every: all cases."""
    if not declared(impl):
        return False
    return every or interpreter != "faithful" or int(case.case_id, 16) % FAITHFUL_ONE_IN == 0


def fresh(inputs: Inputs) -> Inputs:
    """Copies of every array: a kernel that kept (or wrote into) the first run's buffers cannot pass on them."""
    copies = {
        f.name: getattr(inputs, f.name).copy()
        for f in dataclasses.fields(inputs)
        if isinstance(getattr(inputs, f.name), np.ndarray)
    }
    return dataclasses.replace(inputs, **copies)


def difference(a: np.ndarray | None, b: np.ndarray | None) -> float:
    """Largest difference of two runs' arrays, NaN matching NaN; inf when only one has the quantity or shapes differ."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else np.inf
    if a.shape != b.shape:
        return np.inf
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if same.all():
        return 0.0
    with np.errstate(invalid="ignore"):
        return float(np.nan_to_num(np.abs(a - b)[~same].max(), nan=np.inf))


def comparison(first: Outputs, again: Outputs | str, *, bounds: dict[str, float] | None = None) -> Comparison:
    """The rerun against the first run: bound 0 (a reproducible kernel returns the same bits), except the
    quantities in `bounds` (declared to vary), each held to its bound there."""
    bounds = bounds or {}
    if isinstance(again, str):
        value, where = np.inf, f"the rerun raised where the first run returned: {again}"
    else:
        diffs = {q: difference(first.get(q), again.get(q)) for q in QUANTITIES}
        over = {q: d for q, d in diffs.items() if d > bounds.get(q, 0.0)}
        value = max(over.values(), default=0.0)
        held = f"; {', '.join(sorted(bounds))} within the tolerance" if bounds else ""
        differ = ", ".join(over)
        where = f"differs from the first run on fresh copies of the inputs ({differ}{held})" if over else ""
        where = where or f"the same bits on a rerun with fresh copies of the inputs{held}"
    return exact_zero(REPRODUCIBLE, value, where)
