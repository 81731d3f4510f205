"""The float64 truth: numpy for a shape met for the first time, the compiled reference after; the same numbers."""

from __future__ import annotations

import numpy as np

from harness.core import reference
from harness.core.case import Case
from harness.core.inputs import make_inputs
from harness.core.masks import Mask, Window

# Every input the truth's program depends on: bias, soft cap, sinks, a window, GQA, residuals.
CASE = Case(
    batch=2,
    q_heads=4,
    kv_heads=2,
    q_len=16,
    kv_len=24,
    head_dim=8,
    dtype="bfloat16",
    bias=True,
    soft_cap=3.0,
    sinks=True,
    residuals=True,
    mask=Mask(window=Window(2, 1, offset=-3)),
)


def test_the_first_truth_of_a_shape_is_numpy_the_next_compiled_and_they_agree(monkeypatch):
    monkeypatch.setattr(reference, "_TRUTH_SEEN", set())
    compiled = []
    real = reference.run_reference
    monkeypatch.setattr(reference, "run_reference", lambda *a, **kw: compiled.append(kw["dtype"]) or real(*a, **kw))
    inputs = make_inputs(CASE)
    first = reference.truth(CASE, inputs, grads=True)
    assert compiled == []
    again = reference.truth(CASE.replace(seed=1), make_inputs(CASE.replace(seed=1)), grads=True)
    assert compiled == [np.float64]  # the same shape again: the compiled program
    want = real(CASE, inputs, grads=True, dtype=np.float64)
    for q in ("out", "dq", "dk", "dv", "dbias", "dsinks", "lse"):
        assert first.get(q) is not None and again.get(q) is not None, q
        finite = np.isfinite(want.get(q))
        assert (finite == np.isfinite(first.get(q))).all(), q
        np.testing.assert_allclose(first.get(q)[finite], want.get(q)[finite], rtol=0, atol=1e-13, err_msg=q)


def test_a_truth_without_residuals_has_no_logsumexp_either_way(monkeypatch):
    monkeypatch.setattr(reference, "_TRUTH_SEEN", set())
    case = CASE.replace(residuals=False)
    inputs = make_inputs(case)
    assert reference.truth(case, inputs, grads=False).lse is None
    assert reference.truth(case, inputs, grads=False).lse is None
