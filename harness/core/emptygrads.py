"""The backward of rows that see no key: their cotangent, and the truth's gradient under a declared value.

A row that sees no key has a forward value each implementation declares (Implementation.empty_rows,
padded_rows: harness.core.contract.EmptyRows). Its gradient is the gradient of that declared forward,
with the row's probabilities P in the softmax backward (what autodiff of the natural implementation and a
flash backward from the logsumexp both compute):
  zeros:   P = 0, so the row adds nothing to dq, dk, dv, dbias or dsinks;
  uniform: P_j = 1 / Lk on every key j; dv[j] += o / Lk, and the row's logit gradient
           ds_j = P_j (o . v_j - sum_i P_i o . v_i) reaches q, k and the bias where the kernel adds its finite
           fill to the logits (fill "added": s + fill) and stops at the mask where it replaces them (fill
           "replaced": where(visible, s, fill)), Implementation.empty_row_fill says which;
  convex, nan, nan_or_convex, unwritten: no gradient is defined (which keys a convex row averages depends on
           the kernel's tiling; NaN and unwritten rows have none). Those rows get a zero cotangent and are
           not judged: the result says so by name (GRADIENT_UNDEFINED).

Half the cases give these rows a cotangent (harness.core.inputs.empty_cotangent: by the seed's parity, so
no draw changes); the truth's gradient is then the reference's (whose own value is zeros) plus `uniform`
where declared.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from harness.core.case import Case
from harness.core.extended import repeat_kv, sum_groups
from harness.core.inputs import NP_DTYPES, Inputs, empty_cotangent

if TYPE_CHECKING:
    from harness.core.contract import Implementation, Outputs

# How a uniform row's finite fill meets the logits (Implementation.empty_row_fill).
FILLS = ("added", "replaced")
# The words of a failure whose gradients are wrong on these rows alone (Direction.words).
ALONE = "wrong in the gradients of rows that see no key alone"
# Why no gradient is judged for rows declared so: the note the result carries for them.
GRADIENT_UNDEFINED = {
    "convex": "which keys a convex row averages depends on the tiling",
    "nan": "a NaN row has no gradient",
    "nan_or_convex": "a NaN row has no gradient and which keys a convex one averages depends on the tiling",
    "unwritten": "an unwritten row has no value to differentiate",
}


def padded(case: Case) -> np.ndarray | None:
    """bool [batch, q_len]: query rows at or past their batch row's valid query length; None without q lengths."""
    lengths = case.mask.lengths
    if lengths is None or lengths.q is None:
        return None
    return np.arange(case.q_len)[None, :] >= np.asarray(lengths.q)[:, None]


@dataclasses.dataclass(frozen=True, kw_only=True)
class RowSet:
    """Rows that see no key under one declared value: `rows` bool [batch, q_heads, q_len]; `quantity` the
    forward check's name ("out[empty]", "out[padded]"); `refused` why their gradient is not judged, or None."""

    rows: np.ndarray
    convention: str
    quantity: str
    fill: str | None
    refused: str | None

    @property
    def judged(self) -> bool:
        return self.refused is None


def refusal(convention: str, case: Case, fill: str | None) -> str | None:
    """Why rows declared `convention` have no gradient to judge in `case`; None where they have one."""
    if convention in GRADIENT_UNDEFINED:
        return f"gradient undefined: {GRADIENT_UNDEFINED[convention]}"
    if convention == "zeros":
        return None
    if convention != "uniform":
        raise ValueError(f"unknown empty-row convention {convention!r}")
    if fill is None:
        return "uniform rows: the kernel declares no fill (Implementation.empty_row_fill: added or replaced)"
    if fill not in FILLS:
        return fill  # the kernel's own sentence on why their gradient is not judged
    if case.soft_cap is not None:
        return "uniform rows under a soft cap: whether the fill goes in before or after the cap is not settled"
    if case.sinks:
        return "uniform rows with sinks: not settled"
    return None


def row_sets(case: Case, empty: np.ndarray, declared: dict[str, tuple[str, str | None]]) -> list[RowSet]:
    """The row sets of `empty` (bool [B, Hq, Lq]) by declared value: `declared` maps "empty" and "padded"
    to (convention, fill); padded query rows are a set of their own where their declaration differs."""
    pad = padded(case)
    conv, fill = declared["empty"]
    if pad is None or declared["padded"] == declared["empty"]:
        sets = [("out[empty]", empty, conv, fill)]
    else:
        pad = np.broadcast_to(pad[:, None, :], empty.shape)
        sets = [("out[empty]", empty & ~pad, conv, fill), ("out[padded]", empty & pad, *declared["padded"])]
    return [
        RowSet(rows=rows, convention=c, quantity=q, fill=f, refused=refusal(c, case, f))
        for q, rows, c, f in sets
        if rows.any()
    ]


def cotangent(inputs: Inputs, sets: list[RowSet]) -> Inputs:
    """`inputs` with a zero cotangent on every row set whose gradient is not judged."""
    off = np.zeros(inputs.empty.shape, bool)
    for s in sets:
        if not s.judged:
            off |= s.rows
    return without_cotangent(inputs, off)


def without_cotangent(inputs: Inputs, rows: np.ndarray | None = None) -> Inputs:
    """`inputs` with a zero cotangent on `rows` (bool [B, Hq, Lq]; default: every row that sees no key)."""
    rows = inputs.empty if rows is None else rows
    if not rows.any() or not inputs.dout[rows].any():
        return inputs
    return dataclasses.replace(inputs, dout=np.where(rows[..., None], np.zeros((), inputs.dout.dtype), inputs.dout))


def uniform(case: Case, inputs: Inputs, rows: np.ndarray, *, fill: str) -> dict[str, np.ndarray]:
    """float64 gradients that the uniform rows `rows` (bool [B, Hq, Lq]) add: dq, dk, dv and (with a bias)
    dbias; with fill "replaced" only dv is nonzero (the logits' gradient stops at the mask)."""
    return _terms(case, inputs, rows, fill=fill, size=False)


def _terms(case: Case, inputs: Inputs, rows: np.ndarray, *, fill: str, size: bool) -> dict[str, np.ndarray]:
    """uniform's gradients, or with `size` the sums of their terms' absolute values (as harness.core.magnitudes
    sizes the reference's, for the tolerance's floor)."""
    f = (lambda a: np.abs(np.asarray(a, np.float64))) if size else (lambda a: np.asarray(a, np.float64))  # noqa: E731
    group = case.q_heads // case.kv_heads
    q, dout = f(inputs.q), f(inputs.dout) * rows[..., None]  # only these rows' cotangent
    k, v = (repeat_kv(f(a), group) for a in (inputs.k, inputs.v))
    p = np.broadcast_to(rows[..., None] / case.kv_len, (*rows.shape, case.kv_len))  # [B, Hq, Lq, Lk]
    out = {"dv": sum_groups(np.swapaxes(p, -1, -2) @ dout, group)}
    dp = dout @ np.swapaxes(v, -1, -2)
    di = (p * dp).sum(axis=-1, keepdims=True)
    ds = p * (dp + di) if size else p * (dp - di)
    if fill == "replaced":
        ds = np.zeros_like(ds)
    out["dq"] = ds @ k * case.sm_scale
    out["dk"] = sum_groups(np.swapaxes(ds, -1, -2) @ q * case.sm_scale, group)
    if inputs.bias is not None:
        out["dbias"] = ds
    return out


def declared(impl: Implementation, case: Case, empty: np.ndarray) -> list[RowSet]:
    """`impl`'s row sets of `empty` (bool [B, Hq, Lq]) in `case`, by its declared values and fill."""
    fill = impl.empty_row_fill(case)
    return row_sets(case, empty, {"empty": (impl.empty_rows(case), fill), "padded": (impl.padded_rows(case), fill)})


def subject_inputs(impl: Implementation, case: Case, inputs: Inputs) -> Inputs:
    """The inputs `impl` runs on: the case's, with a zero cotangent on rows whose gradient it leaves undefined."""
    if not inputs.empty.any():
        return inputs
    return cotangent(inputs, declared(impl, case, inputs.empty))


def expected(
    impl: Implementation, case: Case, inputs: Inputs, truth: Outputs, ruler: Outputs, magnitudes: dict[str, float]
) -> tuple[Outputs, Outputs, dict[str, float]]:
    """The truth, the ruler and the floor's magnitudes of `impl`'s gradients: the reference's (computed with no
    cotangent on rows that see no key) plus what its judged uniform rows add, exact in the truth and rounded to
    the case dtype in the ruler (the reference in the case dtype rounds its own gradients so)."""
    if not inputs.empty.any() or truth.dq is None:
        return truth, ruler, magnitudes
    mine = subject_inputs(impl, case, inputs)
    truth, ruler, magnitudes = dataclasses.replace(truth), dataclasses.replace(ruler), dict(magnitudes)
    dtype = NP_DTYPES[case.dtype]
    for s in declared(impl, case, inputs.empty):
        if s.convention != "uniform" or not s.judged or not mine.dout[s.rows].any():
            continue
        sizes = _terms(case, mine, s.rows, fill=s.fill, size=True)
        for q, add in uniform(case, mine, s.rows, fill=s.fill).items():
            setattr(truth, q, truth.get(q) + add)
            setattr(ruler, q, (ruler.get(q) + add).astype(dtype).astype(np.float64))
            magnitudes[q] = max(magnitudes[q], float(sizes[q].max(initial=0)))
    return truth, ruler, magnitudes


@dataclasses.dataclass(frozen=True, kw_only=True)
class Direction:
    """What an error confined to the gradients of the judged rows that see no key looks like: per quantity,
    the gradient a uniform row adds there (`grads`); `zeros` where every such row is declared zeros (the
    direction is then that of a kernel treating them as uniform, fill "added")."""

    grads: dict[str, np.ndarray]
    zeros: bool

    def words(self, scale: float) -> str:
        """A failing gradient's error as `scale` times this direction, in words."""
        if self.zeros:
            return f"{ALONE}: {scale:.3g}x a uniform row's gradient (zeros have none)"
        return f"{ALONE}: {1 + scale:.3g}x their declared value's gradient"  # the kernel's: 1 + scale times theirs


def direction(impl: Implementation, case: Case, inputs: Inputs) -> Direction | None:
    """The Direction of `impl`'s judged rows that see no key in `case`; None where none has a cotangent. A
    failing gradient whose error is a multiple of it, within the tolerance, is wrong on those rows alone
    (harness.running.runner)."""
    mine = subject_inputs(impl, case, inputs)
    sets = [s for s in declared(impl, case, inputs.empty) if s.judged and mine.dout[s.rows].any()]
    if not sets:
        return None
    rows = np.logical_or.reduce([s.rows for s in sets])
    fills = [s.fill for s in sets if s.convention == "uniform"]
    return Direction(grads=uniform(case, mine, rows, fill=fills[0] if fills else "added"), zeros=not fills)


def note(s: RowSet, case: Case, *, grads: bool) -> str:
    """What became of the set's gradients, for its forward check's note; "" where none was asked for."""
    if not grads or not empty_cotangent(case):
        return ""
    if s.judged:
        return f"their gradients judged ({s.convention}{'' if s.fill is None else ', fill ' + s.fill})"
    return f"their gradients not judged, cotangent 0: {s.refused}"
