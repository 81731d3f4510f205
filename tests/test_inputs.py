"""The extreme-value regimes of harness.core.inputs: exact float32 logits far from zero, and their control."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from harness.core import contract
from harness.core.case import EXTREME_REGIMES, Case, CaseError
from harness.core.extended import softmax
from harness.core.inputs import NP_DTYPES, make_inputs
from harness.core.masks import Mask
from harness.running.runner import run_case
from tests.planted import spec


def _case(regime: str, dtype: str = "float32", **changes) -> Case:
    base = Case(batch=2, q_heads=2, kv_heads=1, q_len=32, kv_len=32, head_dim=64, dtype=dtype, regime=regime)
    return base.replace(**changes)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("regime", ["dominant", "offset"])
@pytest.mark.parametrize("bias", [False, True])
def test_the_shift_regimes_move_logits_far_from_zero_and_keep_them_exact_in_float32(dtype, regime, bias):
    case = _case(regime, dtype, bias=bias, mask=Mask(causal="top_left"), scale=1.0 if bias else None)
    inputs = make_inputs(case)
    exact = softmax(case, inputs, np.float64).logits
    f32 = inputs.astype(np.float32)
    s = np.einsum("bhqd,bhkd->bhqk", f32.q, np.repeat(f32.k, 2, axis=1)) * np.float32(case.sm_scale)
    if bias:
        s = s + f32.bias
    seen = np.isfinite(exact)
    assert (s[seen] == exact[seen]).all()  # a float32 kernel's logits are the truth's, far from zero too
    far = 2.0**14 / 8 if dtype == "float16" else 1e5  # float16: its dot product stays in range (inputs.EXACT_DOT_OF)
    assert np.abs(exact[seen]).max() >= far


def test_near_max_values_reach_the_largest_a_rows_sum_can_hold():
    for dtype in ("float32", "bfloat16", "float16"):
        case = _case("near_max", dtype)
        v = make_inputs(case).v.astype(np.float64)
        top = float(ml_dtypes.finfo(NP_DTYPES[dtype]).max)
        assert np.abs(v).sum(axis=2).max() <= top / 2  # an unnormalised sum over the keys stays finite
        assert np.abs(v).max() > top / (8 * case.kv_len)


def test_an_extreme_regime_needs_a_power_of_two_scale():
    with pytest.raises(CaseError, match="power-of-two scale"):
        _case("offset", head_dim=32)  # 1/sqrt(32)
    assert _case("offset", head_dim=32, scale=0.25).sm_scale == 0.25
    assert set(EXTREME_REGIMES) == {"dominant", "offset", "near_max"}


# The planted finite mask value (-5e4) shows only where a masked key lies 5e4 above the visible ones.
MASKED = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, mask=Mask(causal="top_left"), seed=1)


def test_a_finite_mask_value_is_caught_only_by_the_dominant_regime_and_upstream_passes():
    planted, upstream = contract.resolve(spec("fwd_mask_value_finite")), contract.resolve("pallas_flash")
    result = run_case(MASKED.replace(regime="dominant"), [planted, upstream], grads=False, policy="fast")
    bad, good = result.subjects
    assert not bad.passed and good.passed, (bad.failure, good.failure)
    for regime in ("normal", "large", "offset"):
        case = MASKED.replace(regime=regime)
        assert run_case(case, [planted], grads=False, policy="fast").passed, regime
