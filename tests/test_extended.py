"""The extended-precision truth (float64 cases) against the float64 JAX reference, feature by feature."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import extended, reference
from harness.core.case import Case
from harness.core.inputs import make_inputs
from harness.core.masks import Mask, Window

pytestmark = pytest.mark.skipif(extended.EXTENDED is None, reason="numpy longdouble is no wider than float64 here")

CASES = {
    "plain": Case(batch=1, q_heads=2, kv_heads=1, q_len=8, kv_len=12, head_dim=4, residuals=True),
    "cap_sinks_bias": Case(
        batch=2,
        q_heads=2,
        kv_heads=1,
        q_len=8,
        kv_len=8,
        head_dim=4,
        bias=True,
        soft_cap=2.0,
        sinks=True,
        residuals=True,
        mask=Mask(window=Window(1, 1, offset=-3)),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_extended_truth_matches_the_float64_reference(name: str) -> None:
    case = CASES[name]
    inputs = make_inputs(case)
    wide = extended.truth(case, inputs, grads=True)
    f64 = reference.run_reference(case, inputs, grads=True, dtype=np.float64)  # the compiled JAX reference
    assert (wide.dsinks is None) == (not case.sinks) == (f64.dsinks is None)
    for q in ("out", "dq", "dk", "dv", "dbias", "dsinks"):
        if f64.get(q) is not None:
            np.testing.assert_allclose(wide.get(q), f64.get(q), rtol=0, atol=1e-13, err_msg=q)
    finite = np.isfinite(f64.lse)
    assert (finite == np.isfinite(wide.lse)).all()
    np.testing.assert_allclose(wide.lse[finite], f64.lse[finite], rtol=0, atol=1e-13)


def test_float64_case_truth_is_extended() -> None:
    case = CASES["plain"].replace(dtype="float64")
    inputs = make_inputs(case)
    wide = reference.truth(case, inputs, grads=False)
    f64 = reference.run_reference(case, inputs, grads=False, dtype=np.float64)
    # Not the float64 computation itself: the two differ by float64 rounding, and not by more.
    assert 0 < np.abs(wide.out - f64.out).max() < 1e-14
