"""Deterministic input arrays for a case: the same case always yields the same bits."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from harness.core.case import Case
from harness.core.masks import dense_mask, empty_rows

NP_DTYPES = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float64": np.dtype(np.float64),
}

# Multiplier on q and k in the "large" regime: with unit-normal entries the scaled
# logits have standard deviation about LARGE**2, so rows reach |logit| ~ 100, past
# float32's exp overflow at ~88 unless the kernel subtracts the running max.
LARGE = 5.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inputs:
    """Arrays in the case dtype (numpy; bfloat16 via ml_dtypes), plus the dense mask.

    dout is the output cotangent for the backward pass. It is zero on query rows that
    see no key, so their (convention-dependent) outputs do not leak into gradients.
    """

    q: np.ndarray  # [batch, q_heads, q_len, head_dim]
    k: np.ndarray  # [batch, kv_heads, kv_len, head_dim]
    v: np.ndarray  # [batch, kv_heads, kv_len, head_dim]
    bias: np.ndarray | None  # [batch, q_heads, q_len, kv_len], added after scaling
    dout: np.ndarray  # [batch, q_heads, q_len, head_dim]
    visible: np.ndarray  # bool [batch, q_heads, q_len, kv_len]
    empty: np.ndarray  # bool [batch, q_heads, q_len]: rows that see no key
    q_segment_ids: np.ndarray | None  # int32 [batch, q_len]
    kv_segment_ids: np.ndarray | None  # int32 [batch, kv_len]
    sinks: np.ndarray | None = None  # [q_heads] in the case dtype: one extra logit per query head

    def astype(self, dtype: np.dtype) -> Inputs:
        cast = lambda a: None if a is None else a.astype(dtype)  # noqa: E731
        return dataclasses.replace(
            self,
            q=cast(self.q),
            k=cast(self.k),
            v=cast(self.v),
            bias=cast(self.bias),
            dout=cast(self.dout),
            sinks=cast(self.sinks),
        )


def int8_grid(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and a per-token step (a power of two) with codes * step == x for x on the grid.

    x: [..., head_dim]. The step is 2**ceil(log2(max|x| / 127)) per token, so codes stay
    within +-127 and codes * step is exact in every case dtype (7 significant bits). Applied
    to values already on the grid it returns the same codes and step: the adapter recovers
    the int8 pages from the dequantized inputs exactly.
    """
    x = np.asarray(x, np.float64)
    peak = np.max(np.abs(x), axis=-1, keepdims=True)
    step = np.exp2(np.ceil(np.log2(np.where(peak > 0, peak, 127.0) / 127.0)))
    codes = np.clip(np.rint(x / step), -127, 127).astype(np.int8)
    return codes, step


def make_inputs(case: Case) -> Inputs:
    rng = np.random.default_rng(case.seed)
    dt = NP_DTYPES[case.dtype]
    qshape = (case.batch, case.q_heads, case.q_len, case.head_dim)
    kshape = (case.batch, case.kv_heads, case.kv_len, case.head_dim)
    q = rng.standard_normal(qshape)
    k = rng.standard_normal(kshape)
    v = rng.standard_normal(kshape)
    if case.regime == "large":
        q, k = q * LARGE, k * LARGE
    elif case.regime == "ties":
        k = np.broadcast_to(k[:, :, :1, :], kshape).copy()
    if case.kv_format == "int8":
        k, v = (codes * step for codes, step in (int8_grid(k), int8_grid(v)))
    bias = None
    if case.bias:
        bias = rng.standard_normal((case.batch, case.q_heads, case.q_len, case.kv_len))
        if case.regime == "large":
            bias = bias * LARGE
        elif case.regime == "ties":
            # A bias that varies per key would break the ties; keep it constant per row.
            bias = np.broadcast_to(bias[..., :1], bias.shape).copy()
    visible = dense_mask(case.mask, batch=case.batch, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len)
    empty = empty_rows(visible)
    dout = rng.standard_normal(qshape) * ~empty[..., None]
    sinks = None
    if case.sinks:
        # Drawn after every other array, so a case without sinks keeps its inputs bit for bit.
        # Unit normal plus 1: about as large as a row's largest logit at the default scale, so the
        # sink takes a visible share of the softmax without swamping it.
        sinks = rng.standard_normal(case.q_heads) + 1.0
        if case.regime == "large":
            sinks = sinks * LARGE**2
    segs = case.mask.segments
    return Inputs(
        q=q.astype(dt),
        k=k.astype(dt),
        v=v.astype(dt),
        bias=None if bias is None else bias.astype(dt),
        dout=dout.astype(dt),
        visible=visible,
        empty=empty,
        q_segment_ids=None if segs is None else segs.ids("q"),
        kv_segment_ids=None if segs is None else segs.ids("kv"),
        sinks=None if sinks is None else sinks.astype(dt),
    )
