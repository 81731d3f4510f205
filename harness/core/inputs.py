"""Deterministic input arrays for a case: the same case always yields the same bits."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from harness.core.case import EXTREME_REGIMES, Case
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

# --- The extreme-value regimes (harness.core.case.EXTREME_REGIMES) ---
# Far from zero, float32 logits keep only a few bits after the point (ulp(1e5) = 2**-7), so a
# kernel and the same-dtype ruler would each round them differently and the comparison would judge
# noise. So these regimes keep a correct kernel's logits exact: q, k (and a bias) lie on a grid of
# multiples of 1/GRID, the softmax scale is a power of two (Case checks it), and the shift's
# factors are powers of two; every product is then a multiple of 1/GRID**2 and every partial
# sum of a row's dot product, in any order, stays below 2**24 of those units (EXACT_DOT).
GRID = 2
EXACT_DOT = 2.0**21
# float16: the dot product itself must stay inside float16's range (max 65504), where the ruler
# (the reference in the case dtype) forms it before scaling.
EXACT_DOT_OF = {"float16": 2.0**14}
# How far the offset and dominant regimes move logits: past any finite mask value a kernel might
# use in place of -inf (flashinfer-ai/flashinfer#4267: -5e4), within float16's range for float16
# cases (a kernel that forms float16 logits must still represent them; max 65504).
SHIFT = {"float16": 2.0**14}
DEFAULT_SHIFT = 2.0**17
# near_max: values as large as an online softmax's unnormalised accumulator allows: it sums a row's
# weighted values with weights up to 1 before dividing (and a row with no visible key, under a finite
# mask value, sums them all), so the values peak at M / (2 * kv_len) of the dtype's largest finite
# number M and that sum stays finite; larger, every such kernel overflows where the truth is finite
# (measured: pallas_flash, pallas_gpu at M / 16). The output cotangent is ~1/sqrt(M), so the
# backward's dout . v products stay near sqrt(M), far inside float32 (q and k stay ordinary: at M
# their logits would overflow every kernel's float32 arithmetic, a limit, not a bug).
NEAR_MAX_SPREAD = 4  # the values' standard deviation is the peak over this: 4 sigma, few clipped


def _grid(x: np.ndarray) -> np.ndarray:
    return np.rint(x * GRID) / GRID


def _shift_factors(case: Case) -> tuple[float, float, float]:
    """The logit shift T and powers of two a * b = T / scale (the shift's q and k components); T is
    capped where T / scale would pass EXACT_DOT (a tiny scale), so the logits stay exact."""
    shift = min(SHIFT.get(case.dtype, DEFAULT_SHIFT), EXACT_DOT_OF.get(case.dtype, EXACT_DOT) * case.sm_scale)
    e = round(np.log2(shift / case.sm_scale))
    return shift, 2.0 ** (e - e // 2), 2.0 ** (e // 2)


def _extreme(case: Case, rng: np.random.Generator, q: np.ndarray, k: np.ndarray, v: np.ndarray, bias):
    """q, k, v and the bias of an extreme regime, from the unit-normal draws (bias may be None).

    offset: each query row's logits all moved by +-T (its sign drawn per row): in the bias when the
      case has one, else through q[..., 0] = +-a against k[..., 0] = b for every key.
    dominant: one key per (batch, kv head), at a drawn position, T above the other keys of every
      query that sees it (q[..., 0] = a, that key's k[..., 0] = b, the others' 0).
    near_max: v as large as a row's unnormalised sum allows (NEAR_MAX_SPREAD)."""
    q, k = _grid(q), _grid(k)
    bias = None if bias is None else _grid(bias)
    shift, a, b = _shift_factors(case)
    if case.regime == "offset":
        sign = rng.choice([-1.0, 1.0], size=q.shape[:-1])
        if bias is not None:
            bias = bias + sign[..., None] * shift
        else:
            q[..., 0], k[..., 0] = sign * a, b
    elif case.regime == "dominant":
        q[..., 0], k[..., 0] = a, 0.0
        key = rng.integers(0, case.kv_len, size=k.shape[:2])
        np.put_along_axis(k[..., 0], key[..., None], b, axis=-1)
    else:
        peak = float(ml_dtypes.finfo(NP_DTYPES[case.dtype]).max) / (2 * case.kv_len)
        v = np.clip(v * peak / NEAR_MAX_SPREAD, -peak, peak)
    return q, k, v, bias


def _cotangent_scale(case: Case) -> float:
    if case.regime != "near_max":
        return 1.0
    return float(np.exp2(-np.ceil(np.log2(float(ml_dtypes.finfo(NP_DTYPES[case.dtype]).max)) / 2)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inputs:
    """Arrays in the case dtype (numpy; bfloat16 via ml_dtypes), plus the dense mask.

    dout is the output cotangent for the backward pass. On query rows that see no key it is zero
    unless empty_cotangent(case): then those rows' gradients are judged against the gradient of each
    implementation's declared value for them (harness.core.emptygrads).
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


def empty_cotangent(case: Case) -> bool:
    """Whether the rows that see no key get a nonzero output cotangent: odd seeds, half the cases. Their
    cotangent is drawn in every case, so this changes no draw and a case without such rows no bit."""
    return case.seed % 2 == 1


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
    bias = None
    if case.bias:
        bias = rng.standard_normal((case.batch, case.q_heads, case.q_len, case.kv_len))
        if case.regime == "large":
            bias = bias * LARGE
        elif case.regime == "ties":
            # A bias that varies per key would break the ties; keep it constant per row.
            bias = np.broadcast_to(bias[..., :1], bias.shape).copy()
    if case.regime in EXTREME_REGIMES:
        # Drawn after the normal regimes' arrays, so their cases keep their inputs bit for bit.
        q, k, v, bias = _extreme(case, rng, q, k, v, bias)
    if case.kv_format == "int8":
        k, v = (codes * step for codes, step in (int8_grid(k), int8_grid(v)))
    visible = dense_mask(case.mask, batch=case.batch, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len)
    empty = empty_rows(visible)
    kept = np.ones_like(empty) if empty_cotangent(case) else ~empty
    dout = rng.standard_normal(qshape) * kept[..., None] * _cotangent_scale(case)
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
