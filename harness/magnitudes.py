"""The size of the terms each quantity sums, for the rounding floor of the tolerance.

A sum's rounding error is bounded by eps * n * sum(|terms|), not by |sum|: when terms
cancel (a softmax row with one visible key has dq == 0 exactly) the truth is 0 but every
kernel still rounds terms of ordinary size. So the floor scales with these magnitudes.
"""

from __future__ import annotations

import numpy as np

from harness.case import Case
from harness.inputs import Inputs


def term_magnitudes(case: Case, inputs: Inputs) -> dict[str, float]:
    """Largest sum of |terms| per quantity (float64), for out, dq, dk, dv, dbias."""
    f = lambda a: a.astype(np.float64)  # noqa: E731
    group = case.q_heads // case.kv_heads
    q = f(inputs.q)
    k, v = (np.repeat(f(a), group, axis=1) for a in (inputs.k, inputs.v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * case.sm_scale
    if inputs.bias is not None:
        s = s + f(inputs.bias)
    s = np.where(inputs.visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    denom = p.sum(axis=-1, keepdims=True)
    p = p / np.where(denom == 0, 1, denom)
    dout = f(inputs.dout)
    out = p @ v
    dp = dout @ np.swapaxes(v, -1, -2)
    di = (out * dout).sum(-1, keepdims=True)
    ds_terms = p * (np.abs(dp) + np.abs(di))

    def per_kv_head(a: np.ndarray) -> np.ndarray:  # gradients of repeated heads sum per group
        b, h, n, d = a.shape
        return a.reshape(b, h // group, group, n, d).sum(axis=2)

    return {
        "out": float((p @ np.abs(v)).max(initial=0)),
        "dv": float(per_kv_head(np.swapaxes(p, -1, -2) @ np.abs(dout)).max(initial=0)),
        "dq": float((case.sm_scale * ds_terms @ np.abs(k)).max(initial=0)),
        "dk": float(per_kv_head(case.sm_scale * np.swapaxes(ds_terms, -1, -2) @ np.abs(q)).max(initial=0)),
        "dbias": float(ds_terms.max(initial=0)),
    }
