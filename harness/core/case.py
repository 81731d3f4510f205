"""The attention case: one frozen value that flows from strategy to runner, record, report and repro."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from harness.core.errors import InputError
from harness.core.masks import Mask

CASE_SCHEMA = 1
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
# float64 is a case dtype only where an implementation declares it (jax.nn.dot_product_attention,
# the oracles): DTYPES stays the dtypes every kernel takes, so `dtypes=DTYPES` never draws it.
FLOAT64 = "float64"
CASE_DTYPES: tuple[str, ...] = (*DTYPES, FLOAT64)
# normal: unit-normal q, k, v. large: q and k scaled so logits reach tens to hundreds,
# where an exp without max-subtraction overflows. ties: every key in a row identical,
# so each query's logits are all equal (softmax must be exactly uniform). The extreme-value
# regimes (harness.core.inputs, issue 28): dominant (one key per row ~1e5 above the rest), offset
# (every row's logits shifted ~1e5 below or above zero), near_max (values near the dtype's largest
# finite number); each needs a power-of-two softmax scale (inputs.exact_scale), so that a correct
# kernel's float32 logits stay exact however far from zero they lie.
EXTREME_REGIMES: tuple[str, ...] = ("dominant", "offset", "near_max")
ORDINARY_REGIMES: tuple[str, ...] = ("normal", "large", "ties")
REGIMES: tuple[str, ...] = (*ORDINARY_REGIMES, *EXTREME_REGIMES)
# K/V storage formats besides the case dtype. int8: k and v are held as int8 codes times a
# per-token power-of-two step (harness.core.inputs.int8_grid), as a quantized KV cache holds them;
# every implementation, oracles included, sees the dequantized values in the case dtype,
# so a comparison measures the kernel's arithmetic, not the quantization error.
KV_FORMATS: tuple[str, ...] = ("int8",)


class CaseError(InputError):
    """A case description that cannot be built; the message names the field and the fix."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Case:
    """One attention problem, in the SDPA convention: softmax(Q K^T * scale + bias) V.

    With soft_cap c, the logits s = Q K^T * scale + bias become c * tanh(s / c) before the mask
    (splash's and paged attention's attn_logits_soft_cap, Gemma 2's logit capping). With sinks,
    each query head h has one extra logit sinks[h] (harness.core.inputs) that joins every row's
    softmax denominator and carries no value: out = sum_j exp(s_j - m) v_j / (exp(sink - m) +
    sum_j exp(s_j - m)); it is neither scaled nor capped. residuals: the kernel also returns the
    logsumexp of each query row (sinks included), checked against the truth's.

    q: [batch, q_heads, q_len, head_dim]; k, v: [batch, kv_heads, kv_len, head_dim].
    q_heads must be a multiple of kv_heads (MHA: equal, GQA: a divisor, MQA: 1).
    scale None means 1/sqrt(head_dim). `blocks` are the kernel's tile sizes by name
    (empty means the kernel's default), and a paged kernel's page layout; they never change
    the mathematics. kv_format "int8": k and v are exactly representable as int8 pages (see KV_FORMATS).
    """

    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    dtype: str = "float32"
    mask: Mask = Mask()
    bias: bool = False
    scale: float | None = None
    blocks: tuple[tuple[str, int], ...] = ()
    regime: str = "normal"
    seed: int = 0
    kv_format: str | None = None
    soft_cap: float | None = None
    sinks: bool = False
    residuals: bool = False

    def __post_init__(self) -> None:
        for name in ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise CaseError(f"{name}={value!r} must be a positive integer")
        if self.q_heads % self.kv_heads:
            raise CaseError(
                f"q_heads={self.q_heads} must be a multiple of kv_heads={self.kv_heads} (GQA groups query heads)"
            )
        if self.dtype not in CASE_DTYPES:
            raise CaseError(f"dtype={self.dtype!r} is not one of {CASE_DTYPES}")
        if self.regime not in REGIMES:
            raise CaseError(f"regime={self.regime!r} is not one of {REGIMES}")
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise CaseError(f"scale={self.scale!r} must be a positive finite number or None")
        if self.regime in EXTREME_REGIMES and math.frexp(self.sm_scale)[0] != 0.5:
            raise CaseError(
                f"regime={self.regime!r} needs a power-of-two scale (exact logits), got {self.sm_scale:g}; "
                "set scale=1.0 or 0.25, or a head_dim of 64 or 256"
            )
        if self.soft_cap is not None and (
            isinstance(self.soft_cap, bool) or not (math.isfinite(self.soft_cap) and self.soft_cap > 0)
        ):
            raise CaseError(f"soft_cap={self.soft_cap!r} must be a positive finite number or None")
        for name in ("sinks", "residuals"):
            if not isinstance(getattr(self, name), bool):
                raise CaseError(f"{name}={getattr(self, name)!r} must be true or false")
        if not isinstance(self.mask, Mask):
            raise CaseError(f"mask must be a harness.core.masks.Mask, got {type(self.mask).__name__}")
        if self.kv_format is not None and self.kv_format not in KV_FORMATS:
            raise CaseError(f"kv_format={self.kv_format!r} is not None or one of {KV_FORMATS}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise CaseError(f"seed={self.seed!r} must be a non-negative integer")
        # Normalise blocks so that equal cases compare and hash equal.
        blocks = self.blocks.items() if isinstance(self.blocks, Mapping) else self.blocks
        blocks = tuple(sorted((str(k), int(v)) for k, v in blocks))
        for k, v in blocks:
            if v <= 0:
                raise CaseError(f"block size {k}={v} must be positive")
        object.__setattr__(self, "blocks", blocks)
        try:
            self.mask.validate(batch=self.batch, heads=self.q_heads, q_len=self.q_len, kv_len=self.kv_len)
        except ValueError as e:
            raise CaseError(str(e)) from None

    @property
    def sm_scale(self) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def block_dict(self) -> dict[str, int]:
        return dict(self.blocks)

    @property
    def mask_label(self) -> str:
        parts = sorted(self.mask.components) + (["bias"] if self.bias else [])
        return "+".join(parts) or "none"

    @property
    def case_id(self) -> str:
        """Stable short id: the same case always gets the same id."""
        text = json.dumps(self.to_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def replace(self, **changes: Any) -> Case:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        # Fields added after schema 1 only when set: cases written before they existed keep
        # their JSON and ids.
        extra = {name: getattr(self, name) for name, default in _LATER_FIELDS.items() if getattr(self, name) != default}
        return extra | {
            "schema": CASE_SCHEMA,
            "batch": self.batch,
            "q_heads": self.q_heads,
            "kv_heads": self.kv_heads,
            "q_len": self.q_len,
            "kv_len": self.kv_len,
            "head_dim": self.head_dim,
            "dtype": self.dtype,
            "mask": self.mask.to_json(),
            "bias": self.bias,
            "scale": self.scale,
            "blocks": dict(self.blocks),
            "regime": self.regime,
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, d: Any) -> Case:
        """Strict: missing or unknown fields are errors that name them."""
        if not isinstance(d, dict):
            raise CaseError(f"a case must be a JSON object, got {type(d).__name__}")
        required = {"batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"}
        known = {f.name for f in dataclasses.fields(cls)} | {"schema"}
        missing = required - set(d)
        if missing:
            raise CaseError(f"case is missing fields {sorted(missing)}")
        unknown = set(d) - known
        if unknown:
            raise CaseError(f"case has unknown fields {sorted(unknown)}; known: {sorted(known)}")
        if d.get("schema", CASE_SCHEMA) != CASE_SCHEMA:
            raise CaseError(
                f"case schema={d.get('schema')!r} is not supported; this harness reads schema {CASE_SCHEMA}"
            )
        kw = {k: v for k, v in d.items() if k != "schema"}
        try:
            if "mask" in kw:
                kw["mask"] = Mask.from_json(kw["mask"] or {})
            if "blocks" in kw:
                kw["blocks"] = tuple((kw["blocks"] or {}).items())
            return cls(**kw)
        except CaseError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise CaseError(f"bad case field: {e}") from None

    def __str__(self) -> str:
        heads = f"H={self.q_heads}" if self.q_heads == self.kv_heads else f"Hq={self.q_heads}/Hkv={self.kv_heads}"
        lens = f"L={self.q_len}" if self.q_len == self.kv_len else f"Lq={self.q_len}/Lk={self.kv_len}"
        blocks = " blocks=" + ",".join(f"{k}={v}" for k, v in self.blocks) if self.blocks else ""
        scale = "" if self.scale is None else f" scale={self.scale:g}"
        kv = "" if self.kv_format is None else f" kv={self.kv_format}"
        cap = "" if self.soft_cap is None else f" soft_cap={self.soft_cap:g}"
        flags = "".join(f" {name}" for name in ("sinks", "residuals") if getattr(self, name))
        return (
            f"B={self.batch} {heads} {lens} D={self.head_dim} {self.dtype}{kv} mask={self.mask_label}"
            f" {self.regime}{scale}{cap}{flags} seed={self.seed}{blocks}"
        )


# Case fields added after schema 1, and their defaults: to_json writes each only when set.
_LATER_FIELDS: dict[str, Any] = {"kv_format": None, "soft_cap": None, "sinks": False, "residuals": False}
