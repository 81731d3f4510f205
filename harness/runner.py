"""Run one case through every subject and compare each with the float64 truth.

Pipeline step two and three: case -> run -> compare. Recording and reporting take the
CaseResult this returns and never see live arrays.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Any

import numpy as np

from harness import compat
from harness.case import Case
from harness.compare import Comparison, check_empty_rows, compare, tolerance
from harness.contract import QUANTITIES, Implementation, Outputs
from harness.inputs import Inputs, make_inputs
from harness.magnitudes import term_magnitudes
from oracles import jax_reference


@dataclasses.dataclass
class SubjectResult:
    """One implementation on one case."""

    implementation: str
    role: str
    backend: str
    empty_rows: str
    passed: bool
    comparisons: list[Comparison]
    error: str | None = None
    traceback: str | None = None
    seconds: float = 0.0

    @property
    def worst(self) -> Comparison | None:
        """The comparison closest to (or furthest past) its bound."""
        finite = [c for c in self.comparisons if c.bound and np.isfinite(c.bound)]
        bad = [c for c in self.comparisons if not c.passed]
        if bad:
            return bad[0]
        return max(finite, key=lambda c: c.max_abs / c.bound, default=None)

    @property
    def failure(self) -> str | None:
        """One line saying why it failed, or None."""
        if self.passed:
            return None
        if self.error:
            return self.error
        return "; ".join(
            f"{c.quantity}: err {c.max_abs:.3g} > bound {c.bound:.3g}" + (f" ({c.note})" if c.note else "")
            for c in self.comparisons
            if not c.passed
        )


@dataclasses.dataclass
class CaseResult:
    case: Case
    subjects: list[SubjectResult]
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.subjects)


def _errors(
    impl: Implementation, case: Case, inputs: Inputs, got: Outputs, truth: Outputs, ruler: Outputs
) -> list[Comparison]:
    empty = inputs.empty
    rows = ~empty if empty.any() else None
    mags = term_magnitudes(case, inputs)
    out = [
        compare("out", got.out, truth.out, ruler.out, tolerance(case.dtype, "out"), magnitude=mags["out"], rows=rows)
    ]
    if empty.any():
        group = case.q_heads // case.kv_heads
        values = np.repeat(inputs.v.astype(np.float64), group, axis=1)
        out.append(check_empty_rows(impl.empty_rows(case), got.out, values, empty, case.dtype))
    for q in QUANTITIES[1:]:
        want = truth.get(q)
        if want is None:
            continue
        if q == "dbias" and not impl.capabilities.dbias:
            continue
        out.append(compare(q, got.get(q), want, ruler.get(q), tolerance(case.dtype, q), magnitude=mags[q]))
    return out


def run_subject(
    impl: Implementation, case: Case, inputs: Inputs, truth: Outputs, ruler: Outputs, *, grads: bool
) -> SubjectResult:
    """Run one implementation; any exception becomes a failed result, never a crash."""
    start = time.perf_counter()
    meta = {
        "implementation": impl.name,
        "role": impl.role,
        "backend": impl.backend(),
        "empty_rows": impl.empty_rows(case),
    }
    try:
        got = impl.run(case, inputs, grads=grads)
    except Exception as e:  # noqa: BLE001 - a kernel's exception is a finding, not a harness crash
        if impl.backend() == "tpu_interpret":
            compat.reset_tpu_interpreter()
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return SubjectResult(
            **meta,
            passed=False,
            comparisons=[],
            error=f"{type(e).__name__}: {first}"[:500],
            traceback=traceback.format_exc(limit=8),
            seconds=time.perf_counter() - start,
        )
    seconds = time.perf_counter() - start
    comps = _errors(impl, case, inputs, got, truth, ruler)
    return SubjectResult(**meta, passed=all(c.passed for c in comps), comparisons=comps, seconds=seconds)


def run_case(case: Case, subjects: list[Implementation], *, grads: bool = True) -> CaseResult:
    """Truth (float64), ruler (same dtype), then every subject against them."""
    start = time.perf_counter()
    inputs = make_inputs(case)
    truth = jax_reference.truth(case, inputs, grads=grads)
    ruler = jax_reference.run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)
    results = [run_subject(impl, case, inputs, truth, ruler, grads=grads) for impl in subjects]
    return CaseResult(case=case, subjects=results, seconds=time.perf_counter() - start)


def summary_row(result: CaseResult) -> dict[str, Any]:
    """Plain data for a progress line: no formatting here."""
    return {
        "case": str(result.case),
        "passed": result.passed,
        "seconds": result.seconds,
        "subjects": {s.implementation: (s.passed, s.worst) for s in result.subjects},
    }
