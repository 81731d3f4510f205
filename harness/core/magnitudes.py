"""The size of the terms each quantity sums, for the rounding floor of the tolerance.

A sum's rounding error is bounded by eps * n * sum(|terms|), not by |sum|: when terms
cancel (a softmax row with one visible key has dq == 0 exactly) the truth is 0 but every
kernel still rounds terms of ordinary size. So the floor scales with these magnitudes.
"""

from __future__ import annotations

import numpy as np

from harness.core.case import Case
from harness.core.extended import repeat_kv, softmax, sum_groups
from harness.core.inputs import Inputs


def term_magnitudes(case: Case, inputs: Inputs) -> dict[str, float]:
    """Largest sum of |terms| per quantity (float64), for out, dq, dk, dv, dbias, lse and dsinks (0 without sinks)."""
    f = lambda a: a.astype(np.float64)  # noqa: E731
    group = case.q_heads // case.kv_heads
    q = f(inputs.q)
    k, v = (repeat_kv(f(a), group) for a in (inputs.k, inputs.v))
    sm = softmax(case, inputs, np.float64)
    p = sm.p
    dout = f(inputs.dout)
    out = p @ v
    dp = dout @ np.swapaxes(v, -1, -2)
    di = (out * dout).sum(-1, keepdims=True)
    ds_terms = p * (np.abs(dp) + np.abs(di))
    if sm.tanh is not None:
        ds_terms = ds_terms * (1 - sm.tanh * sm.tanh)  # the soft cap's derivative scales every logit gradient
    # The logsumexp sums exp of the logits: its rounding grows with the largest logit and with
    # the result itself (m + log(sum)), over rows that see a key or a sink.
    finite = np.where(np.isfinite(sm.logits), np.abs(sm.logits), 0).max(axis=-1, initial=0)
    lse = np.where(np.isfinite(sm.lse), np.maximum(np.abs(sm.lse), finite), 0)
    # dsinks[h] = -sum over batch rows and queries of p_sink * di, and di sums out * dout over the
    # head dim, each out itself a sum of p |v|: the terms of all three sums, per query head.
    dsinks = 0.0
    if sm.sink is not None:
        terms = sm.sink * ((p @ np.abs(v)) * np.abs(dout)).sum(axis=-1, keepdims=True)
        dsinks = float(terms.sum(axis=(0, 2, 3)).max(initial=0))
    return {
        "out": float((p @ np.abs(v)).max(initial=0)),
        "dv": float(sum_groups(np.swapaxes(p, -1, -2) @ np.abs(dout), group).max(initial=0)),
        "dq": float((case.sm_scale * ds_terms @ np.abs(k)).max(initial=0)),
        "dk": float(sum_groups(case.sm_scale * np.swapaxes(ds_terms, -1, -2) @ np.abs(q), group).max(initial=0)),
        "dbias": float(ds_terms.max(initial=0)),
        "lse": float(lse.max(initial=0)),
        "dsinks": dsinks,
    }
