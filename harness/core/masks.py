"""Mask descriptions and the one dense mask every oracle builds from them.

A mask is a conjunction of components; a key is visible to a query when every
component present allows it. Kernels translate the description into their own
arguments (their own mask classes where they have them); oracles call `dense_mask`
so that a kernel's mask bug can never be matched by the same bug in an oracle.

Component names (`Mask.components`), which implementations declare in
`Capabilities.mask_components`: causal_top_left, causal_bottom_right, causal_offset,
window, chunk, block_sparse, per_head, segments, q_lengths, kv_lengths, kv_starts
(and "bias", which is not a mask).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

CausalAlignment = Literal["top_left", "bottom_right"]
CAUSAL_ALIGNMENTS: tuple[str, ...] = ("top_left", "bottom_right")

# The components that decide visibility from positions alone, one drawn per mask (or per
# head), in the order strategies shrink towards.
SHAPE_COMPONENTS: tuple[str, ...] = (
    "causal_top_left",
    "causal_bottom_right",
    "causal_offset",
    "window",
    "chunk",
    "block_sparse",
)
# Every component name Mask.components can report.
# Per-batch-row valid lengths (harness.core.masks.Lengths), each its own component.
LENGTH_COMPONENTS: tuple[str, ...] = ("q_lengths", "kv_lengths", "kv_starts")
MASK_COMPONENTS: frozenset[str] = frozenset({*SHAPE_COMPONENTS, "per_head", "segments", *LENGTH_COMPONENTS})

# Restrictions, not components: what a kernel cannot take of the components it declares
# (Capabilities.restrictions), read by the strategies so that every drawn case is inside them.
#   segments_shared: one segment-id array serves q and kv (the Pallas GPU kernel), so
#     segments are drawn identical on both sides, and only when q_len == kv_len.
#   causal_q_le_kv: causal masks only when q_len <= kv_len (the Pallas GPU kernel's causal
#     loop bounds read past the last key otherwise: docs/divergences/).
#   lengths_q_le_kv: valid query lengths never exceed the row's valid key lengths (a ragged
#     kernel's queries are the last positions of their sequence), so both are drawn together.
#   shape_required: every mask has one of the declared shape components (a kernel that is
#     always causal, like ragged paged attention, declares only causal_bottom_right).
#   sliding_window: a window only on top of bottom-right causal, as the last `w` keys up to each
#     query's own position (ragged paged attention's sliding_window): Window(left=w - 1, right=0,
#     offset=kv_len - q_len), every row with queries at that same diagonal (kv[b] - q[b]).
#   window_aligned: windows only at offset 0 with both sides bounded (jax.nn.dot_product_attention's
#     local_window_size=(left, right) has neither an offset nor an unbounded side).
#   some_key_visible: the shape components (shared and per head, at each batch row's diagonal) let
#     some query see some key (splash's mask processing asserts on a mask that hides every key in
#     every head: docs/findings/pallas_splash_fully_masked_assert.md). Segments and lengths, which
#     such a kernel takes at run time, may still hide everything.
SEGMENTS_SHARED = "segments_shared"
SLIDING_WINDOW = "sliding_window"
WINDOW_ALIGNED = "window_aligned"
CAUSAL_Q_LE_KV = "causal_q_le_kv"
LENGTHS_Q_LE_KV = "lengths_q_le_kv"
SHAPE_REQUIRED = "shape_required"
SOME_KEY_VISIBLE = "some_key_visible"
RESTRICTIONS: tuple[str, ...] = (
    SEGMENTS_SHARED,
    SLIDING_WINDOW,
    WINDOW_ALIGNED,
    CAUSAL_Q_LE_KV,
    LENGTHS_Q_LE_KV,
    SHAPE_REQUIRED,
    SOME_KEY_VISIBLE,
)

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
class Window:
    """A band around a shifted diagonal: query i sees keys j with
    i + offset - left <= j <= i + offset + right; None leaves that side unbounded.

    The same definition as splash attention's LocalMask (window_size=(left, right), offset).
    left=None, right=0 is causal with an offset (splash's CausalMask(offset)): offset 0 is
    top-left alignment, offset kv_len - q_len bottom-right; a negative offset leaves the
    first rows with no visible key.
    """

    left: int | None
    right: int | None
    offset: int = 0

    def __post_init__(self) -> None:
        for side in ("left", "right"):
            value = getattr(self, side)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"window {side}={value!r} must be None or a non-negative integer")
        if self.left is None and self.right is None:
            raise ValueError("window left=None and right=None is no mask; give at least one side")
        if not isinstance(self.offset, int):
            raise ValueError(f"window offset={self.offset!r} must be an integer")

    @property
    def is_causal(self) -> bool:
        return self.left is None and self.right == 0

    def visible(self, q_len: int, kv_len: int) -> np.ndarray:
        rows = np.arange(q_len)[:, None] + self.offset
        cols = np.arange(kv_len)[None, :]
        vis = np.ones((q_len, kv_len), bool)
        if self.left is not None:
            vis &= cols >= rows - self.left
        if self.right is not None:
            vis &= cols <= rows + self.right
        return vis

    def to_json(self) -> dict[str, Any]:
        return {"left": self.left, "right": self.right, "offset": self.offset}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Window:
        _known(d, {"left", "right", "offset"}, "window")
        return cls(left=d["left"], right=d["right"], offset=d.get("offset", 0))

    def __repr__(self) -> str:
        if self.is_causal:
            return f"causal(offset={self.offset})"
        return f"window(left={self.left}, right={self.right}, offset={self.offset})"


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Chunked causal attention (Llama 4, splash's ChunkedCausalMask): query i sees key j
    when both lie in the same chunk of `size` positions and j <= i."""

    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size <= 0:
            raise ValueError(f"chunk size={self.size!r} must be a positive integer")

    def visible(self, q_len: int, kv_len: int) -> np.ndarray:
        rows = np.arange(q_len)[:, None]
        cols = np.arange(kv_len)[None, :]
        return (rows // self.size == cols // self.size) & (cols <= rows)

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Chunk:
        _known(d, {"size"}, "chunk")
        return cls(size=d["size"])

    def __repr__(self) -> str:
        return f"chunk({self.size})"


@dataclasses.dataclass(frozen=True)
class BlockSparse:
    """A block pattern: the [q_len, kv_len] plane cut into block_q x block_kv tiles (the last
    row and column of tiles may be partial); tile (r, c) is visible when pattern[r][c] == "1".

    The pattern is stored explicitly, not as a seed, so the description alone fixes the mask.
    """

    block_q: int
    block_kv: int
    pattern: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in ("block_q", "block_kv"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"block_sparse {name}={value!r} must be a positive integer")
        object.__setattr__(self, "pattern", tuple(self.pattern))
        widths = {len(row) for row in self.pattern}
        if not self.pattern or len(widths) != 1 or any(set(row) - {"0", "1"} for row in self.pattern):
            raise ValueError(f"block_sparse pattern={self.pattern!r} must be equal-length rows of '0' and '1'")

    def validate(self, q_len: int, kv_len: int) -> None:
        want = (-(-q_len // self.block_q), -(-kv_len // self.block_kv))
        got = (len(self.pattern), len(self.pattern[0]))
        if got != want:
            raise ValueError(
                f"block_sparse pattern is {got[0]}x{got[1]} tiles; {q_len=}, {kv_len=} with "
                f"block_q={self.block_q}, block_kv={self.block_kv} need {want[0]}x{want[1]}"
            )

    @property
    def density(self) -> float:
        return sum(row.count("1") for row in self.pattern) / (len(self.pattern) * len(self.pattern[0]))

    def visible(self, q_len: int, kv_len: int) -> np.ndarray:
        tiles = np.array([[c == "1" for c in row] for row in self.pattern])
        rows = np.arange(q_len)[:, None] // self.block_q
        cols = np.arange(kv_len)[None, :] // self.block_kv
        return tiles[rows, cols]

    def to_json(self) -> dict[str, Any]:
        return {"block_q": self.block_q, "block_kv": self.block_kv, "pattern": list(self.pattern)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BlockSparse:
        _known(d, {"block_q", "block_kv", "pattern"}, "block_sparse")
        return cls(block_q=d["block_q"], block_kv=d["block_kv"], pattern=tuple(d["pattern"]))

    def __repr__(self) -> str:
        return f"block_sparse({self.block_q}x{self.block_kv}: {'/'.join(self.pattern)})"


@dataclasses.dataclass(frozen=True)
class Lengths:
    """Valid lengths per batch row (a padded or paged batch of sequences of their own lengths).

    q[b]: the first q[b] query rows of row b are real, the rest are padding that sees no key
      (a kernel's output there is a declared convention, checked like rows with no visible key).
    kv[b]: keys j >= kv[b] of row b are invisible (a KV cache filled to kv[b]).
    kv_starts[b]: keys j < kv_starts[b] are invisible too (a decode kernel's start index).
    None on a side means every row is full on that side. Under causal="bottom_right" the
    alignment is per row: query i sees keys j <= i + kv[b] - q[b], so the last real query
    sits at the last valid key (decode queries at the end of their sequence).
    """

    q: tuple[int, ...] | None = None
    kv: tuple[int, ...] | None = None
    kv_starts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for side in ("q", "kv", "kv_starts"):
            value = getattr(self, side)
            if value is None:
                continue
            value = tuple(value)
            object.__setattr__(self, side, value)
            if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in value):
                raise ValueError(f"lengths {side}={value!r} must be non-negative integers, one per batch row")
        if self.q is None and self.kv is None and self.kv_starts is None:
            raise ValueError("lengths with q=None, kv=None and kv_starts=None is no mask; give at least one side")

    @property
    def components(self) -> frozenset[str]:
        names = {"q": "q_lengths", "kv": "kv_lengths", "kv_starts": "kv_starts"}
        return frozenset(name for side, name in names.items() if getattr(self, side) is not None)

    def validate(self, *, batch: int, q_len: int, kv_len: int) -> None:
        for side, limit in (("q", q_len), ("kv", kv_len), ("kv_starts", kv_len)):
            value = getattr(self, side)
            if value is None:
                continue
            if len(value) != batch:
                raise ValueError(f"lengths {side} has {len(value)} rows, expected one per batch row ({batch=})")
            if max(value) > limit:
                raise ValueError(f"lengths {side}={value} exceed the padded length {limit}")

    def valid(self, b: int, q_len: int, kv_len: int) -> tuple[int, int, int]:
        """(q length, kv start, kv end) of batch row b."""
        q = q_len if self.q is None else self.q[b]
        start = 0 if self.kv_starts is None else self.kv_starts[b]
        return q, start, kv_len if self.kv is None else self.kv[b]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"q": _list(self.q), "kv": _list(self.kv)}
        if self.kv_starts is not None:
            out["kv_starts"] = list(self.kv_starts)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Lengths:
        _known(d, {"q", "kv", "kv_starts"}, "lengths")
        return cls(q=_tuple(d.get("q")), kv=_tuple(d.get("kv")), kv_starts=_tuple(d.get("kv_starts")))

    def __repr__(self) -> str:
        parts = [f"{side}={','.join(map(str, v))}" for side in ("q", "kv", "kv_starts") if (v := getattr(self, side))]
        return f"lengths({'; '.join(parts)})"


def _list(value: tuple[int, ...] | None) -> list[int] | None:
    return None if value is None else list(value)


def _tuple(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(value)


def _known(d: Any, known: set[str], what: str) -> None:
    if not isinstance(d, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(d).__name__}")
    unknown = set(d) - known
    if unknown:
        raise ValueError(f"unknown {what} fields {sorted(unknown)}; known: {', '.join(sorted(known))}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mask:
    """Which keys each query may see: the conjunction of every component present.

    causal: None, or "top_left" (query i sees keys j <= i, the flash kernel's and
      SDPA's `is_causal`) or "bottom_right" (query i sees keys j <= i + kv_len - q_len,
      the KV-cache alignment). The two coincide when q_len == kv_len.
    segments: packed-sequence ids; a query sees only keys of its own id.
    window: a band around a shifted diagonal (sliding window, or causal with an offset).
    chunk: chunked causal attention.
    block_sparse: an explicit pattern of visible tiles.
    heads: one further mask per query head (each without segments or heads of its own);
      head h also needs heads[h] to allow the key. Under GQA the masks are per query head.
    lengths: valid query and key lengths per batch row (Lengths); with it, bottom-right
      causal alignment is per row, at each row's valid lengths.
    """

    causal: CausalAlignment | None = None
    segments: Segments | None = None
    window: Window | None = None
    chunk: Chunk | None = None
    block_sparse: BlockSparse | None = None
    heads: tuple[Mask, ...] | None = None
    lengths: Lengths | None = None

    def __post_init__(self) -> None:
        if self.causal is not None and self.causal not in CAUSAL_ALIGNMENTS:
            raise ValueError(f"mask causal={self.causal!r} is not one of None, {CAUSAL_ALIGNMENTS}")
        if self.heads is not None:
            object.__setattr__(self, "heads", tuple(self.heads))
            if not self.heads:
                raise ValueError("mask heads=() is empty; give one mask per query head, or None")
            for h, m in enumerate(self.heads):
                if not isinstance(m, Mask) or m.segments is not None or m.heads is not None or m.lengths is not None:
                    raise ValueError(
                        f"mask heads[{h}]={m!r} must be a Mask without segments or heads (or lengths) of its own"
                    )

    @property
    def components(self) -> frozenset[str]:
        """Component names, as implementations declare support for them (per-head ones included)."""
        out = set()
        if self.causal is not None:
            out.add(f"causal_{self.causal}")
        if self.segments is not None:
            out.add("segments")
        if self.window is not None:
            out.add("causal_offset" if self.window.is_causal else "window")
        if self.chunk is not None:
            out.add("chunk")
        if self.block_sparse is not None:
            out.add("block_sparse")
        if self.heads is not None:
            out.add("per_head")
            for m in self.heads:
                out |= m.components
        if self.lengths is not None:
            out |= self.lengths.components
        return frozenset(out)

    @property
    def label(self) -> str:
        return "+".join(sorted(self.components)) or "none"

    def validate(self, *, batch: int, q_len: int, kv_len: int, heads: int | None = None) -> None:
        """Raise ValueError when the mask does not fit these shapes; `heads` is the query head count."""
        if self.segments is not None:
            s = self.segments
            if len(s.q) != batch:
                raise ValueError(f"segments have {len(s.q)} batch rows, expected {batch=}")
            if any(n != q_len for n in s.lengths("q")) or any(n != kv_len for n in s.lengths("kv")):
                raise ValueError(
                    f"segment runs must cover the sequences: expected {q_len=}, {kv_len=}, "
                    f"got q lengths {s.lengths('q')}, kv lengths {s.lengths('kv')}"
                )
        if self.block_sparse is not None:
            self.block_sparse.validate(q_len, kv_len)
        if self.lengths is not None:
            self.lengths.validate(batch=batch, q_len=q_len, kv_len=kv_len)
        if self.heads is not None:
            if heads is not None and len(self.heads) != heads:
                raise ValueError(f"mask has {len(self.heads)} per-head masks, expected one per query head ({heads=})")
            for m in self.heads:
                m.validate(batch=batch, q_len=q_len, kv_len=kv_len)

    def diagonals(self, *, batch: int, q_len: int, kv_len: int) -> list[int | None]:
        """Per batch row, where bottom-right causal sits (visible_2d's diagonal): with lengths, the row's
        own (its last valid query against its last valid key); else None, kv_len - q_len."""
        if self.lengths is None or self.causal != "bottom_right":
            return [None] * batch
        return [end - q for q, _, end in (self.lengths.valid(b, q_len, kv_len) for b in range(batch))]

    def visible_2d(self, q_len: int, kv_len: int, *, diagonal: int | None = None) -> np.ndarray:
        """The [q_len, kv_len] visibility of the components shared by every batch row and head.

        diagonal: the bottom-right causal offset (default kv_len - q_len; with lengths, a row's own).
        """
        vis = np.ones((q_len, kv_len), dtype=bool)
        rows = np.arange(q_len)[:, None]
        cols = np.arange(kv_len)[None, :]
        if self.causal == "top_left":
            vis &= cols <= rows
        elif self.causal == "bottom_right":
            vis &= cols <= rows + (kv_len - q_len if diagonal is None else diagonal)
        for part in (self.window, self.chunk, self.block_sparse):
            if part is not None:
                vis &= part.visible(q_len, kv_len)
        return vis

    def to_json(self) -> dict[str, Any]:
        # The original two fields always, the later ones only when set: cases written
        # before they existed keep their JSON, and so their case ids.
        d: dict[str, Any] = {
            "causal": self.causal,
            "segments": None if self.segments is None else self.segments.to_json(),
        }
        for name in ("window", "chunk", "block_sparse"):
            part = getattr(self, name)
            if part is not None:
                d[name] = part.to_json()
        if self.heads is not None:
            d["heads"] = [m.to_json() for m in self.heads]
        if self.lengths is not None:
            d["lengths"] = self.lengths.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Mask:
        _known(d, set(_FIELDS), "mask")
        kw: dict[str, Any] = {"causal": d.get("causal")}
        for name, part_cls in _FIELDS.items():
            if part_cls is not None and d.get(name) is not None:
                kw[name] = part_cls.from_json(d[name])
        if d.get("heads") is not None:
            kw["heads"] = tuple(cls.from_json(m) for m in d["heads"])
        return cls(**kw)

    def __repr__(self) -> str:
        parts = []
        if self.causal:
            parts.append(f"causal={self.causal}")
        for part in (self.window, self.chunk, self.block_sparse, self.segments, self.lengths):
            if part is not None:
                parts.append(repr(part))
        if self.heads is not None:
            parts.append("heads=[" + ", ".join(repr(m) for m in self.heads) + "]")
        return f"Mask({', '.join(parts)})"


# Mask JSON fields and the class that reads each (None: read by Mask.from_json itself).
_FIELDS: dict[str, Any] = {
    "causal": None,
    "segments": Segments,
    "window": Window,
    "chunk": Chunk,
    "block_sparse": BlockSparse,
    "heads": None,
    "lengths": Lengths,
}


def shows_some_key(mask: Mask, *, batch: int, q_len: int, kv_len: int) -> bool:
    """Whether the shape components, shared and per head, let some query of some head see some key, at
    every diagonal the batch rows use (bottom-right causal with lengths sits at each row's own): the
    SOME_KEY_VISIBLE restriction. Segments and lengths are not looked at."""
    for d in set(mask.diagonals(batch=batch, q_len=q_len, kv_len=kv_len)):
        shared = mask.visible_2d(q_len, kv_len, diagonal=d)
        heads = [shared & h.visible_2d(q_len, kv_len, diagonal=d) for h in mask.heads] if mask.heads else [shared]
        if not any(h.any() for h in heads):
            return False
    return True


def _row_lengths(lengths: Lengths, b: int, q_len: int, kv_len: int) -> np.ndarray:
    """[q_len, kv_len] visibility of batch row b's valid lengths: real queries, keys in [start, end)."""
    q, start, end = lengths.valid(b, q_len, kv_len)
    rows = np.arange(q_len)[:, None]
    cols = np.arange(kv_len)[None, :]
    return (rows < q) & (cols >= start) & (cols < end)


def dense_mask(mask: Mask, *, batch: int, heads: int, q_len: int, kv_len: int) -> np.ndarray:
    """Boolean visibility, shape [batch, heads, q_len, kv_len]; True means visible."""
    if mask.heads is not None and len(mask.heads) != heads:
        raise ValueError(f"mask has {len(mask.heads)} per-head masks, expected one per query head ({heads=})")
    lengths = mask.lengths
    if lengths is None:
        vis = np.broadcast_to(mask.visible_2d(q_len, kv_len), (batch, heads, q_len, kv_len)).copy()
        if mask.heads is not None:
            vis &= np.stack([m.visible_2d(q_len, kv_len) for m in mask.heads])[None]
    else:
        rows = []
        for b, diagonal in enumerate(mask.diagonals(batch=batch, q_len=q_len, kv_len=kv_len)):
            row = mask.visible_2d(q_len, kv_len, diagonal=diagonal) & _row_lengths(lengths, b, q_len, kv_len)
            row = np.broadcast_to(row, (heads, q_len, kv_len))
            if mask.heads is not None:
                row = row & np.stack([m.visible_2d(q_len, kv_len, diagonal=diagonal) for m in mask.heads])
            rows.append(row)
        vis = np.stack(rows)
    if mask.segments is not None:
        qs, ks = mask.segments.ids("q"), mask.segments.ids("kv")
        vis &= qs[:, None, :, None] == ks[:, None, None, :]
    return vis


def empty_rows(visible: np.ndarray) -> np.ndarray:
    """Query rows that see no key, shape [batch, heads, q_len]."""
    return ~visible.any(axis=-1)
