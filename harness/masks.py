"""Mask descriptions and the one dense mask every oracle builds from them.

A mask is a conjunction of components; a key is visible to a query when every
component present allows it. Kernels translate the description into their own
arguments; oracles call `dense_mask` so that a kernel's mask bug can never be
matched by the same bug in an oracle.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

CausalAlignment = Literal["top_left", "bottom_right"]
CAUSAL_ALIGNMENTS: tuple[str, ...] = ("top_left", "bottom_right")

# A run of one segment id: (segment_id, length).
Run = tuple[int, int]


def _runs_to_ids(runs: tuple[Run, ...]) -> np.ndarray:
    return np.concatenate([np.full(n, sid, np.int32) for sid, n in runs]) if runs else np.zeros(0, np.int32)


@dataclasses.dataclass(frozen=True)
class Segments:
    """Packed-sequence segment ids, run-length encoded per batch row.

    `q[b]` is `((segment_id, length), ...)` covering the query sequence of batch row b;
    `kv[b]` likewise for keys. A query whose id appears nowhere in its row's keys
    sees no key at all.
    """

    q: tuple[tuple[Run, ...], ...]
    kv: tuple[tuple[Run, ...], ...]

    def __post_init__(self) -> None:
        if len(self.q) != len(self.kv):
            raise ValueError(f"segments need one q and one kv row per batch: got {len(self.q)=}, {len(self.kv)=}")
        for side, rows in (("q", self.q), ("kv", self.kv)):
            for b, runs in enumerate(rows):
                for sid, n in runs:
                    if n <= 0 or sid < 0:
                        raise ValueError(f"segments.{side}[{b}] has run ({sid}, {n}); ids must be >= 0 and lengths > 0")

    def ids(self, side: Literal["q", "kv"]) -> np.ndarray:
        """Dense ids, shape [batch, length]."""
        return np.stack([_runs_to_ids(r) for r in getattr(self, side)])

    def lengths(self, side: Literal["q", "kv"]) -> tuple[int, ...]:
        return tuple(sum(n for _, n in runs) for runs in getattr(self, side))

    def to_json(self) -> dict[str, Any]:
        return {"q": [[list(r) for r in runs] for runs in self.q], "kv": [[list(r) for r in runs] for runs in self.kv]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Segments:
        def rows(side: str) -> tuple[tuple[Run, ...], ...]:
            return tuple(tuple((int(s), int(n)) for s, n in runs) for runs in d[side])

        return cls(q=rows("q"), kv=rows("kv"))

    def __repr__(self) -> str:
        def fmt(rows: tuple[tuple[Run, ...], ...]) -> str:
            return "|".join(",".join(f"{s}x{n}" for s, n in runs) for runs in rows)

        return f"Segments(q={fmt(self.q)}; kv={fmt(self.kv)})"


@dataclasses.dataclass(frozen=True)
class Mask:
    """Which keys each query may see.

    causal: None, or "top_left" (query i sees keys j <= i, the flash kernel's and
      SDPA's `is_causal`) or "bottom_right" (query i sees keys j <= i + kv_len - q_len,
      the KV-cache alignment). The two coincide when q_len == kv_len.
    segments: packed-sequence ids; a query sees only keys of its own id.
    """

    causal: CausalAlignment | None = None
    segments: Segments | None = None

    def __post_init__(self) -> None:
        if self.causal is not None and self.causal not in CAUSAL_ALIGNMENTS:
            raise ValueError(f"mask causal={self.causal!r} is not one of None, {CAUSAL_ALIGNMENTS}")

    @property
    def components(self) -> frozenset[str]:
        """Component names, as implementations declare support for them."""
        out = set()
        if self.causal is not None:
            out.add(f"causal_{self.causal}")
        if self.segments is not None:
            out.add("segments")
        return frozenset(out)

    @property
    def label(self) -> str:
        return "+".join(sorted(self.components)) or "none"

    def validate(self, *, batch: int, q_len: int, kv_len: int) -> None:
        if self.segments is not None:
            s = self.segments
            if len(s.q) != batch:
                raise ValueError(f"segments have {len(s.q)} batch rows, expected {batch=}")
            if any(n != q_len for n in s.lengths("q")) or any(n != kv_len for n in s.lengths("kv")):
                raise ValueError(
                    f"segment runs must cover the sequences: expected {q_len=}, {kv_len=}, "
                    f"got q lengths {s.lengths('q')}, kv lengths {s.lengths('kv')}"
                )

    def to_json(self) -> dict[str, Any]:
        return {"causal": self.causal, "segments": None if self.segments is None else self.segments.to_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Mask:
        unknown = set(d) - {"causal", "segments"}
        if unknown:
            raise ValueError(f"unknown mask fields {sorted(unknown)}; known: causal, segments")
        seg = d.get("segments")
        return cls(causal=d.get("causal"), segments=None if seg is None else Segments.from_json(seg))

    def __repr__(self) -> str:
        parts = []
        if self.causal:
            parts.append(f"causal={self.causal}")
        if self.segments is not None:
            parts.append(repr(self.segments))
        return f"Mask({', '.join(parts)})"


def dense_mask(mask: Mask, *, batch: int, heads: int, q_len: int, kv_len: int) -> np.ndarray:
    """Boolean visibility, shape [batch, heads, q_len, kv_len]; True means visible."""
    vis = np.ones((batch, heads, q_len, kv_len), dtype=bool)
    rows = np.arange(q_len)[:, None]
    cols = np.arange(kv_len)[None, :]
    if mask.causal == "top_left":
        vis &= cols <= rows
    elif mask.causal == "bottom_right":
        vis &= cols <= rows + (kv_len - q_len)
    if mask.segments is not None:
        qs, ks = mask.segments.ids("q"), mask.segments.ids("kv")
        vis &= qs[:, None, :, None] == ks[:, None, None, :]
    return vis


def empty_rows(visible: np.ndarray) -> np.ndarray:
    """Query rows that see no key, shape [batch, heads, q_len]."""
    return ~visible.any(axis=-1)
