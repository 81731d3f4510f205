"""The tolerance floor's scale: the largest sum of |terms| of each quantity, checked term by term."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from harness.core import reference
from harness.core.case import Case
from harness.core.inputs import Inputs, make_inputs
from harness.core.magnitudes import term_magnitudes
from harness.core.masks import Mask


def brute_force(case: Case, x: Inputs | None = None) -> dict[str, float]:
    """term_magnitudes written out index by index from the attention sums, in float64.

    out[i,d] = sum_j p_ij v_jd; dv[j,d] = sum_(h in group, i) p_ij dout_id;
    ds_ij = p_ij (dp_ij - di_i) with dp_ij = dout_i . v_j and di_i = out_i . dout_i;
    dq[i,d] = scale sum_j ds_ij k_jd; dk[j,d] = scale sum_(h in group, i) ds_ij q_id; dbias = ds.
    Each sum's terms are bounded by their absolute values, ds by p (|dp| + |di|).
    lse: the larger of |logsumexp| and the largest |logit| of the row.
    dsinks[h] = -sum_(b, i) p_sink di_i, its terms p_sink sum_d |out|_id |dout_id| with |out|_id = sum_j p_ij |v_jd|.
    """
    x = make_inputs(case) if x is None else x
    q, k, v, dout = (a.astype(np.float64) for a in (x.q, x.k, x.v, x.dout))
    group = case.q_heads // case.kv_heads
    mags = dict.fromkeys(("out", "dq", "dk", "dv", "dbias", "lse", "dsinks"), 0.0)
    dsinks_sums = np.zeros(case.q_heads)
    dv_sums = np.zeros((case.batch, case.kv_heads, case.kv_len, case.head_dim))
    dk_sums = np.zeros_like(dv_sums)
    for b, h in itertools.product(range(case.batch), range(case.q_heads)):
        kh = h // group
        for i in range(case.q_len):
            seen = [j for j in range(case.kv_len) if x.visible[b, h, i, j]]
            if not seen:
                continue
            raw = {
                j: q[b, h, i] @ k[b, kh, j] * case.sm_scale + (x.bias[b, h, i, j] if case.bias else 0.0) for j in seen
            }
            cap = case.soft_cap
            logits = {j: s if cap is None else cap * np.tanh(s / cap) for j, s in raw.items()}
            slope = {j: 1.0 if cap is None else 1 - np.tanh(s / cap) ** 2 for j, s in raw.items()}
            sink = None if x.sinks is None else float(x.sinks[h])
            top = max(logits.values()) if sink is None else max(*logits.values(), sink)
            weights = {j: np.exp(s - top) for j, s in logits.items()}
            total = sum(weights.values()) + (0.0 if sink is None else np.exp(sink - top))
            lse = top + np.log(total)
            mags["lse"] = max(mags["lse"], abs(lse), *(abs(s) for s in logits.values()))
            p = {j: w / total for j, w in weights.items()}
            out = sum(p[j] * v[b, kh, j] for j in seen)
            di = out @ dout[b, h, i]
            ds = {j: p[j] * (abs(dout[b, h, i] @ v[b, kh, j]) + abs(di)) * slope[j] for j in seen}
            for d in range(case.head_dim):
                mags["out"] = max(mags["out"], sum(p[j] * abs(v[b, kh, j, d]) for j in seen))
                mags["dq"] = max(mags["dq"], sum(case.sm_scale * ds[j] * abs(k[b, kh, j, d]) for j in seen))
                for j in seen:
                    dv_sums[b, kh, j, d] += p[j] * abs(dout[b, h, i, d])
                    dk_sums[b, kh, j, d] += case.sm_scale * ds[j] * abs(q[b, h, i, d])
            mags["dbias"] = max(mags["dbias"], *ds.values())
            if sink is not None:
                out_abs = sum(p[j] * np.abs(v[b, kh, j]) for j in seen)
                dsinks_sums[h] += np.exp(sink - top) / total * (out_abs @ np.abs(dout[b, h, i]))
    mags["dv"], mags["dk"] = float(dv_sums.max()), float(dk_sums.max())
    mags["dsinks"] = float(dsinks_sums.max())
    return mags


CASES = {
    "plain": Case(batch=1, q_heads=1, kv_heads=1, q_len=3, kv_len=5, head_dim=2, seed=1),
    # GQA: gradients of the query heads sharing a key head sum into it.
    "gqa_bias": Case(batch=2, q_heads=4, kv_heads=2, q_len=4, kv_len=3, head_dim=3, bias=True, scale=0.7, seed=2),
    # Bottom-right causal with more queries than keys: the first rows see no key and add nothing.
    "empty_rows": Case(batch=1, q_heads=2, kv_heads=1, q_len=5, kv_len=3, head_dim=2, mask=Mask(causal="bottom_right")),
    "large": Case(batch=1, q_heads=1, kv_heads=1, q_len=4, kv_len=4, head_dim=2, regime="large", seed=3),
    # A soft cap scales every logit's gradient by 1 - tanh^2; sinks join every denominator.
    "cap_sinks": Case(
        batch=1, q_heads=2, kv_heads=1, q_len=3, kv_len=4, head_dim=2, bias=True, soft_cap=2.0, sinks=True, seed=4
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_magnitudes_are_the_largest_sums_of_absolute_terms(name):
    case = CASES[name]
    got = term_magnitudes(case, make_inputs(case))
    want = brute_force(case)
    assert got.keys() == want.keys()
    for quantity in want:
        assert got[quantity] == pytest.approx(want[quantity], rel=1e-12), quantity


def test_empty_rows_give_finite_magnitudes():
    case = CASES["empty_rows"]
    assert make_inputs(case).empty.any()
    mags = term_magnitudes(case, make_inputs(case))
    assert mags.pop("dsinks") == 0.0  # no sinks, nothing summed
    assert all(np.isfinite(m) and m > 0 for m in mags.values())


def test_magnitudes_bound_the_truth():
    # |sum of terms| <= sum of |terms|: each magnitude is at least the largest |value| of its quantity.
    case = CASES["gqa_bias"].replace(residuals=True, sinks=True)
    inputs = make_inputs(case)
    mags = term_magnitudes(case, inputs)
    truth = reference.truth(case, inputs, grads=True)
    assert truth.dsinks is not None
    for quantity, m in mags.items():
        assert np.abs(truth.get(quantity)).max() <= m * (1 + 1e-12), quantity


def test_one_visible_key_cancels_dq_but_not_its_magnitude():
    # A query that sees only its first key has p == 1 there, so dq == 0 exactly; the floor
    # must still scale with the terms every kernel rounds (the reason the module exists).
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=3, kv_len=3, head_dim=2, mask=Mask(causal="top_left"))
    inputs = make_inputs(case)
    truth = reference.truth(case, inputs, grads=True)
    assert np.abs(truth.dq[0, 0, 0]).max() < 1e-15
    assert term_magnitudes(case, inputs)["dq"] > 0.1


def test_each_row_is_stabilised_by_its_own_largest_logit():
    # Logits near +1000 in one batch row and -1000 in the other: exp overflows without the
    # max subtracted, and the second row underflows to 0/0 if the largest logit of the whole
    # array is subtracted instead of the row's own. Its values are the larger, so it sets
    # the "out" magnitude, which must stay that of the row-wise softmax.
    case = Case(batch=2, q_heads=1, kv_heads=1, q_len=2, kv_len=3, head_dim=2, bias=True, seed=4)
    x = make_inputs(case)
    bias = x.bias + np.array([1000.0, -1000.0], np.float32)[:, None, None, None]
    x = dataclasses.replace(x, bias=bias, v=x.v * np.array([1, 100], np.float32)[:, None, None, None])
    got, want = term_magnitudes(case, x), brute_force(case, x)
    for quantity in want:
        assert got[quantity] == pytest.approx(want[quantity], rel=1e-12), quantity


@pytest.mark.parametrize("sinks", [False, True])
def test_magnitudes_below_1_are_not_rounded_up(sinks: bool) -> None:
    # Inputs scaled near 0: every magnitude is below 1 (the lse one is log 2 without sinks, log 3
    # with), so a maximum started at 1, or a masked logit or a row without keys counted as 1, would show.
    case = Case(batch=1, q_heads=2, kv_heads=1, q_len=3, kv_len=2, head_dim=2, mask=Mask(causal="bottom_right"))
    case = case.replace(sinks=sinks)
    x = make_inputs(case)
    small = {name: getattr(x, name) * np.float32(1e-3) for name in ("q", "v", "dout")}
    x = dataclasses.replace(x, **small, sinks=None if x.sinks is None else x.sinks * np.float32(1e-3))
    assert x.empty.any() and not x.visible.all()
    got, want = term_magnitudes(case, x), brute_force(case, x)
    assert all(m < 1 for q, m in want.items() if q != "lse" or not sinks)
    for quantity in want:
        assert got[quantity] == pytest.approx(want[quantity], rel=1e-12), quantity
