"""Attention from the definition in numpy, at any float precision: the truth of float64 cases.

A float64 case's truth must be more precise than float64 arithmetic in the same order, so it
is computed here in `np.longdouble` (x87 80-bit extended on x86-64, 11 more significant bits
than float64; IEEE quad on aarch64 Linux), forward and backward by hand. Where longdouble is
no wider than float64 (Windows, macOS on Apple silicon) no float64 case can be judged, and
`EXTENDED` is None: implementations then declare no float64 (harness.core.case.FLOAT64).

The same code in float64 gives term magnitudes (harness.core.magnitudes) the probabilities of
every case, soft cap and sinks included.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.core.case import FLOAT64, Case
from harness.core.contract import Outputs
from harness.core.inputs import Inputs

# The widest float numpy has here, or None when it is no wider than float64.
EXTENDED: type[np.floating] | None = np.longdouble if np.finfo(np.longdouble).eps < np.finfo(np.float64).eps else None


def with_float64(dtypes: tuple[str, ...]) -> tuple[str, ...]:
    """`dtypes`, and float64 where a truth more precise than float64 exists here (EXTENDED): what an
    oracle that computes in the case dtype declares."""
    return dtypes + ((FLOAT64,) if EXTENDED is not None else ())


@dataclasses.dataclass(frozen=True, kw_only=True)
class Softmax:
    """One case's forward softmax in the working precision.

    p: probabilities [B, Hq, Lq, Lk] (rows with no visible key and no sink are 0);
    tanh: tanh(s / soft_cap) where the case has a soft cap, else None (for the derivative);
    lse: logsumexp per row [B, Hq, Lq] (-inf on rows with no visible key and no sink);
    logits: the capped logits, -inf where masked;
    sink: the sink's probability per row [B, Hq, Lq, 1] where the case has sinks, else None.
    """

    p: np.ndarray
    tanh: np.ndarray | None
    lse: np.ndarray
    logits: np.ndarray
    sink: np.ndarray | None = None


def repeat_kv(a: np.ndarray, group: int) -> np.ndarray:
    return np.repeat(a, group, axis=1)


def sum_groups(a: np.ndarray, group: int) -> np.ndarray:
    """A gradient of the repeated k/v heads summed back per kv head."""
    b, h, n, d = a.shape
    return a.reshape(b, h // group, group, n, d).sum(axis=2)


def softmax(case: Case, inputs: Inputs, dtype: type[np.floating]) -> Softmax:
    """softmax(cap(Q K^T * scale + bias)) with the sinks in the denominator, in `dtype`."""
    group = case.q_heads // case.kv_heads
    q = inputs.q.astype(dtype)
    k = repeat_kv(inputs.k.astype(dtype), group)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * dtype(case.sm_scale)
    if inputs.bias is not None:
        s = s + inputs.bias.astype(dtype)
    tanh = None
    if case.soft_cap is not None:
        cap = dtype(case.soft_cap)
        tanh = np.tanh(s / cap)
        s = cap * tanh
    s = np.where(inputs.visible, s, dtype(-np.inf))
    m = s.max(axis=-1, keepdims=True)
    sinks = None if inputs.sinks is None else inputs.sinks.astype(dtype)[None, :, None, None]
    if sinks is not None:
        m = np.maximum(m, sinks)
    m = np.where(np.isfinite(m), m, dtype(0))
    p = np.exp(s - m)
    denom = p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        denom = denom + np.exp(sinks - m)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(denom))[..., 0]
    # Rows with no visible key have denom 0: their output is 0 (the declared convention).
    denom = np.where(denom == 0, dtype(1), denom)
    sink = None if sinks is None else np.exp(sinks - m) / denom
    return Softmax(p=p / denom, tanh=tanh, lse=lse, logits=s, sink=sink)


def attention(case: Case, inputs: Inputs, *, grads: bool, dtype: type[np.floating]) -> Outputs:
    """Forward, logsumexp and (with grads) the VJP of inputs.dout, in `dtype`; returned as float64."""
    group = case.q_heads // case.kv_heads
    sm = softmax(case, inputs, dtype)
    v = repeat_kv(inputs.v.astype(dtype), group)
    out = sm.p @ v
    as64 = lambda a: None if a is None else np.asarray(a, np.float64)  # noqa: E731
    if not grads:
        return Outputs(out=as64(out), lse=as64(sm.lse))
    q = inputs.q.astype(dtype)
    k = repeat_kv(inputs.k.astype(dtype), group)
    dout = inputs.dout.astype(dtype)
    dv = sum_groups(np.swapaxes(sm.p, -1, -2) @ dout, group)
    dp = dout @ np.swapaxes(v, -1, -2)
    # A sink carries no value, so sum_j p_j dp_j is still sum(out * dout) with sinks present.
    di = (out * dout).sum(axis=-1, keepdims=True)
    ds = sm.p * (dp - di)
    if sm.tanh is not None:
        ds = ds * (dtype(1) - sm.tanh * sm.tanh)  # d/ds of cap * tanh(s / cap)
    scale = dtype(case.sm_scale)
    dq = ds @ k * scale
    dk = sum_groups(np.swapaxes(ds, -1, -2) @ q * scale, group)
    # The sink's logit gets p_sink * (0 - di) per row, as a key whose dp is 0; one sink per query
    # head serves every batch row and query, so their terms sum.
    dsinks = None if sm.sink is None else -(sm.sink * di).sum(axis=(0, 2, 3))
    return Outputs(
        out=as64(out),
        dq=as64(dq),
        dk=as64(dk),
        dv=as64(dv),
        dbias=as64(ds) if inputs.bias is not None else None,
        lse=as64(sm.lse),
        dsinks=as64(dsinks),
    )


def truth(case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
    """The extended-precision truth of a case (a float64 case's; any case's, for cross-checks)."""
    if EXTENDED is None:
        raise RuntimeError(
            f"numpy's longdouble here is no wider than float64 (eps {np.finfo(np.longdouble).eps}), "
            "so a float64 case has no truth more precise than itself; run float64 cases on x86-64 or aarch64 Linux"
        )
    return attention(case, inputs, grads=grads, dtype=EXTENDED)
