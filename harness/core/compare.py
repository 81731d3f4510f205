"""Pure comparison: arrays in, a Comparison out. Tolerances live in TOLERANCES, nowhere else.

The rule is FlashAttention's own test rule: a kernel's error against the float64
truth may be at most `factor` times the error of a plain same-dtype oracle against
that truth, plus a small floor. The floor is relative to the size of the terms the
quantity sums (harness.core.magnitudes), the scale rounding errors grow with, so that
gradients that grow with the logits, or cancel to zero, are held to one standard.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

# 2: the per-implementation factor for torch_sdpa's float32 output (IMPLEMENTATION_FACTORS).
# 3: float64 (floor 2e-14) and the logsumexp residual "lse" (factor 2, as the output).
# 4: the sinks' gradient "dsinks" (factor 3, as every gradient); no other entry changed.
TOLERANCE_VERSION = 4


@dataclasses.dataclass(frozen=True)
class Tolerance:
    factor: float  # error may be `factor` x the same-dtype oracle's error ...
    floor: float  # ... plus floor x the magnitude of the summed terms

    def bound(self, oracle_err: float, scale: float) -> float:
        return self.factor * oracle_err + self.floor * scale


# factor 2 for the output and 3 for gradients: FlashAttention's tests allow 2x the
# reference's error on the output and on gradients (its dq/dk allow more for long
# sequences). Floors sit at about 100 ulp of each dtype's epsilon, so the floor never
# admits a loss of one precision class: float32 at 1e-5 fails a bfloat16-level error
# (~4e-3), bfloat16 at 1e-3 and float16 at 1e-4 stay below their own rounding of
# the output (bf16 eps 7.8e-3, fp16 eps 9.8e-4). float64 at 2e-14 is float32's ratio to its
# epsilon (1e-5 / 1.19e-7 = 84 ulp; 2e-14 / 2.2e-16 = 90 ulp): a float64 kernel that computes
# anything in float32 (~1e-7) fails by six orders of magnitude. The logsumexp residual is a
# forward result like the output, held to the output's factor; the sinks' gradient is a gradient.
_FLOORS = {"float32": 1e-5, "bfloat16": 1e-3, "float16": 1e-4, "float64": 2e-14}
_FACTORS = {"out": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dbias": 3.0, "lse": 2.0, "dsinks": 3.0}
TOLERANCES: dict[tuple[str, str], Tolerance] = {
    (dtype, quantity): Tolerance(factor, floor)
    for dtype, floor in _FLOORS.items()
    for quantity, factor in _FACTORS.items()
}
# Oracles whose own arithmetic differs from the ruler's by design, measured, never a kernel.
# torch_sdpa float32 "out": torch's CPU SDPA (its flash and math backends alike) computes
# QK^T with its own float32 GEMM, which sums in another order than XLA's dot. On logits of
# a few hundred (the "large" regime) its logit error was 7.7e-05 against XLA's 3.7e-05 on
# B=1 H=1 Lq=32/Lk=16 D=32 large scale=1 seed=3963, and the softmax carried it to an output
# error of 5.48e-05 against the ruler's 5.51e-06: the whole of the error, since the float64
# softmax of torch's float32 logits alone gives the same 5.48e-05. The ruler's own error is
# small by luck on such cases, so the factor needed has a long tail: over 5,600 float32
# "large" cases with 16 keys, the worst shapes (benchmarks/oracle_error.py, 600 to 800 seeds
# per shape, Lq 16 to 256, D 32 to 256), the largest factor needed was 21.5 and the 99th
# percentile 8.3; 32 leaves half again, and is still orders of magnitude below a lost
# precision class (a bfloat16-level error is ~1e4 x). bfloat16 and float16 needed less than
# the standard factor (200 seeds per shape, measured); torch's float32 gradients used at most
# 20% of their standard bound (30 seeds per regime at the shape, measured).
IMPLEMENTATION_FACTORS: dict[tuple[str, str, str], float] = {("torch_sdpa", "float32", "out"): 32.0}
EPS = {
    "float32": float(np.finfo(np.float32).eps),
    "bfloat16": 2.0**-7,
    "float16": float(np.finfo(np.float16).eps),
    "float64": float(np.finfo(np.float64).eps),
}


def tolerance(dtype: str, quantity: str, implementation: str | None = None) -> Tolerance:
    """The table's tolerance, with `implementation`'s declared factor where IMPLEMENTATION_FACTORS has one."""
    base = TOLERANCES[(dtype, quantity.split("[")[0])]
    factor = IMPLEMENTATION_FACTORS.get((implementation, dtype, quantity.split("[")[0]))
    return base if factor is None else dataclasses.replace(base, factor=factor)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Comparison:
    """One quantity of one implementation against the truth.

    max_rel is normwise: max_abs / max|truth|. ratio is max_abs over the same-dtype
    oracle's max_abs (inf when the oracle is exact and the subject is not).
    """

    quantity: str
    max_abs: float
    max_rel: float
    oracle_abs: float
    ratio: float
    bound: float
    passed: bool
    note: str = ""

    @property
    def used(self) -> float:
        """max_abs / bound: the share of its tolerance it used (above 1 fails); nan without a bound."""
        err, bound = float(self.max_abs), float(self.bound)
        if not math.isfinite(bound) or bound <= 0:
            return math.inf if math.isinf(err) else math.nan
        return err / bound

    def to_json(self) -> dict[str, Any]:
        return {k: (_num(v) if isinstance(v, float) else v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Comparison:
        return cls(**{k: (float(v) if k in _FLOAT_FIELDS else v) for k, v in d.items()})


_FLOAT_FIELDS = {"max_abs", "max_rel", "oracle_abs", "ratio", "bound"}


def oracle_multiple(c: Comparison, dtype: str, implementation: str | None = None) -> float | None:
    """The error as a multiple of the same-dtype oracle's (c.ratio), where that multiple means something: None
    where the oracle's own error is not above the tolerance's floor term (floor x magnitude, what is left of the
    bound once the oracle's share is taken out). There the floor sets the bound, and a multiple of an error that
    is about zero (805306368x of 1e-15) is an alarm about nothing; err/bound says how the case did."""
    oracle_err = float(c.oracle_abs)
    if not (math.isfinite(oracle_err) and oracle_err > 0) or (dtype, c.quantity.split("[")[0]) not in TOLERANCES:
        return None  # an exact check (races, a rerun's bits, empty rows) or a failure before any oracle ran
    floor_term = float(c.bound) - tolerance(dtype, c.quantity, implementation).factor * oracle_err
    return float(c.ratio) if oracle_err > floor_term else None


def exact_zero(quantity: str, value: float, note: str) -> Comparison:
    """A check a correct kernel keeps at exactly 0 (a rerun's difference, an interpreter's race count):
    no oracle, bound 0, failed by any difference at all."""
    return Comparison(
        quantity=quantity,
        max_abs=value,
        max_rel=value,
        oracle_abs=0.0,
        ratio=value,
        bound=0.0,
        passed=value == 0.0,
        note=note,
    )


def _num(x: float) -> float | str:
    # JSON has no inf/nan; keep them as strings that float() reads back.
    return x if np.isfinite(x) else str(x)


def _maxabs(a: np.ndarray) -> float:
    return float(np.max(np.abs(a))) if a.size else 0.0


def _failed(quantity: str, note: str, *, oracle_abs: float = np.nan, bound: float = np.nan) -> Comparison:
    """A comparison that failed before any error could be measured (infinite error and ratio)."""
    return Comparison(
        quantity=quantity,
        max_abs=np.inf,
        max_rel=np.inf,
        oracle_abs=oracle_abs,
        ratio=np.inf,
        bound=bound,
        passed=False,
        note=note,
    )


def compare(
    quantity: str,
    got: np.ndarray | None,
    truth: np.ndarray,
    oracle: np.ndarray,
    tol: Tolerance,
    *,
    magnitude: float | None = None,
    rows: np.ndarray | None = None,
) -> Comparison:
    """Compare `got` and the same-dtype `oracle` with `truth`.

    magnitude: the floor's scale (default max|truth|); rows: bool mask on leading axes.
    """
    if got is None:
        return _failed(quantity, "not computed")
    if got.shape != truth.shape:
        return _failed(quantity, f"shape {got.shape} != {truth.shape}")
    if rows is not None:
        got, truth, oracle = got[rows], truth[rows], oracle[rows]
    scale = _maxabs(truth)
    oracle_abs = _maxabs(oracle - truth)
    bound = tol.bound(oracle_abs, max(scale, magnitude or 0.0))
    bad = ~np.isfinite(got) & np.isfinite(truth)
    if bad.any():
        n = int(bad.sum())
        note = f"{n} non-finite values where the truth is finite"
        return _failed(quantity, note, oracle_abs=oracle_abs, bound=bound)
    err = _maxabs(got - truth)
    ratio = err / oracle_abs if oracle_abs > 0 else (0.0 if err == 0 else np.inf)
    return Comparison(
        quantity=quantity,
        max_abs=err,
        max_rel=err / scale if scale > 0 else err,
        oracle_abs=oracle_abs,
        ratio=ratio,
        bound=bound,
        passed=err <= bound,
    )


def check_empty_rows(
    convention: str,
    got: np.ndarray,
    values: np.ndarray,
    empty: np.ndarray,
    dtype: str,
    *,
    quantity: str = "out[empty]",
) -> Comparison:
    """Rows with no visible key against the implementation's declared convention.

    got: output [B, H, Lq, D]; values: v repeated to the query heads [B, H, Lk, D], float64;
    empty: bool [B, H, Lq]; quantity: the row set's name in the error table ("out[padded]"
    for padded query rows).
    """
    n = int(empty.sum())
    rows = got[empty]  # [n, D]
    scale = _maxabs(values)
    # The declared value is exact up to the output's rounding to its dtype.
    bound = (2 * EPS[dtype] + tolerance(dtype, "out").floor) * max(scale, 1.0)
    if convention == "nan_or_convex":
        # Each row is checked whole: all NaN, or else held to "convex" (so a half-NaN row fails).
        nan_rows = np.isnan(rows).all(axis=-1)
        rest = empty.copy()
        rest[empty] = ~nan_rows
        c = check_empty_rows("convex", got, values, rest, dtype, quantity=quantity)
        note = f"{n} rows ({int(nan_rows.sum())} NaN), declared nan_or_convex" + c.note.partition("convex")[2]
        return dataclasses.replace(c, note=note)
    if convention in ("unwritten", "nan"):
        return _unchecked_rows(convention, rows, quantity)
    if not np.isfinite(rows).all():
        return Comparison(
            quantity=quantity,
            max_abs=np.inf,
            max_rel=np.inf,
            oracle_abs=0.0,
            ratio=np.inf,
            bound=bound,
            passed=False,
            note=f"{n} rows, declared {convention}, got non-finite",
        )
    err = _maxabs(rows - _expected_rows(convention, got, values, empty))
    return Comparison(
        quantity=quantity,
        max_abs=err,
        max_rel=err / scale if scale else err,
        oracle_abs=0.0,
        ratio=0.0,
        bound=bound,
        passed=err <= bound,
        note=f"{n} rows, declared {convention}",
    )


def _unchecked_rows(convention: str, rows: np.ndarray, quantity: str) -> Comparison:
    """Empty rows declared "unwritten" (nothing to check) or "nan" (all NaN); rows: [n, D]."""
    n = len(rows)
    if convention == "unwritten":
        # Upstream leaves these rows as the output buffer was: no value can be declared.
        return Comparison(
            quantity=quantity,
            max_abs=0.0,
            max_rel=0.0,
            oracle_abs=0.0,
            ratio=0.0,
            bound=0.0,
            passed=True,
            note=f"{n} rows, declared unwritten (not checked)",
        )
    ok = bool(np.isnan(rows).all())
    return Comparison(
        quantity=quantity,
        max_abs=0.0 if ok else np.inf,
        max_rel=0.0,
        oracle_abs=0.0,
        ratio=0.0,
        bound=0.0,
        passed=ok,
        note=f"{n} rows, declared nan",
    )


def _expected_rows(convention: str, got: np.ndarray, values: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """[n, D]: the declared value of each empty row (for "convex", the nearest point of the hull of the value rows)."""
    rows = got[empty]
    if convention == "zeros":
        return np.zeros_like(rows)
    if convention == "uniform":
        return np.broadcast_to(values.mean(axis=2, keepdims=True), got.shape)[empty]
    if convention == "convex":
        lo = np.broadcast_to(values.min(axis=2, keepdims=True), got.shape)[empty]
        hi = np.broadcast_to(values.max(axis=2, keepdims=True), got.shape)[empty]
        return np.clip(rows, lo, hi)  # distance outside the hull of the value rows
    raise ValueError(f"unknown empty-row convention {convention!r}")
