"""Hypothesis strategies for attention cases, built in layers, valid by construction.

Each layer reads the implementation's declared Capabilities, so a drawn case is
always inside its contract; block sizes come from the implementation's own
`block_strategy`, which knows its tiling rules.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from harness.core import profiles  # noqa: F401 - Hypothesis's draws made independent of loaded modules
from harness.core.case import EXTREME_REGIMES, REGIMES, Case
from harness.core.contract import Capabilities, Implementation
from harness.core.masks import (
    CAUSAL_Q_LE_KV,
    LENGTH_COMPONENTS,
    LENGTHS_Q_LE_KV,
    SEGMENTS_SHARED,
    SHAPE_COMPONENTS,
    SHAPE_REQUIRED,
    SLIDING_WINDOW,
    SOME_KEY_VISIBLE,
    WINDOW_ALIGNED,
    BlockSparse,
    Chunk,
    Lengths,
    Mask,
    Segments,
    Window,
    shows_some_key,
)

__all__ = [
    "block_sparse",
    "cases",
    "chunks",
    "lengths",
    "masks",
    "segment_runs",
    "segments",
    "tile_edges",
    "valid_lengths",
    "windows",
]

# Segment ids outside any key row's ids: queries with such an id see no key at all.
ORPHAN_ID = 99
# Scales besides the default 1/sqrt(head_dim): 1.0 is the Pallas kernel's own default
# (the largest logits), 0.03 flattens the softmax towards uniform.
SCALES = (1.0, 0.25, 0.03)
# Logit soft caps: Gemma 2's 50 (attention) rarely bites at unit-normal logits but does in
# the "large" regime; 5 and 1 saturate tanh on ordinary logits, where the cap's derivative
# (1 - tanh^2) nears 0 and a misplaced cap shows most.
SOFT_CAPS = (50.0, 5.0, 1.0)
# Scales of the extreme-value regimes, each a power of two (their logits stay exact, harness.core.inputs):
# the two of SCALES that are, and one near a limit per regime (LIMIT_SCALES): 2**8 for the shift
# regimes (float16 logits in the thousands, past exp's range without a running max), 2**-16 for
# near_max (float16 logits near its smallest normal, 6e-5). Not 2**8 with near_max: its gradients
# (scale times values near the dtype's largest) would pass float16's range in the truth itself; not
# 2**-16 with the shifts: inputs.EXACT_DOT would cap the shift to nothing.
EXACT_SCALES = (1.0, 0.25)
LIMIT_SCALES = {"offset": (2.0**8,), "dominant": (2.0**8,), "near_max": (2.0**-16,)}


def _exact(scale: float | None, head_dim: int) -> bool:
    """Whether the softmax scale is a power of two (float32 logits on the regimes' grid stay exact)."""
    return math.frexp(1.0 / math.sqrt(head_dim) if scale is None else scale)[0] == 0.5


def _regime_and_scale(draw: st.DrawFn, regimes: tuple[str, ...], scale: float | None, head_dim: int):
    """A regime, and the scale it is drawn with: an extreme regime draws a power-of-two scale of its own."""
    regime = draw(st.sampled_from(regimes))
    if regime not in EXTREME_REGIMES:
        return regime, scale
    return regime, draw(st.sampled_from(_extreme_scales(regime, scale, head_dim)))


def _extreme_scales(regime: str, scale: float | None, head_dim: int) -> tuple[float | None, ...]:
    """The scales an extreme `regime` is drawn with, given the case's ordinary draw `scale`."""
    keep = (scale,) if _exact(scale, head_dim) else ()
    return (*keep, *EXACT_SCALES, *LIMIT_SCALES[regime])


def takes_scale(regime: str, scale: float | None, head_dim: int) -> bool:
    """Whether `_regime_and_scale` can pair `regime` with `scale`, from any ordinary draw (None or one of
    SCALES). A limit scale with an ordinary regime (2**8 on "large" float16 values) overflows the
    same-dtype ruler's logits."""
    ordinary = (None, *SCALES)
    if regime not in EXTREME_REGIMES:
        return scale in ordinary
    return any(scale in _extreme_scales(regime, drawn, head_dim) for drawn in ordinary)


F = TypeVar("F", bound=Callable)


def _reused(factory: F) -> F:
    """`factory`'s strategy built once per set of arguments. Hypothesis validates a strategy, and works out
    whether it can be empty, the first time it draws from it: for a strategy built anew inside every draw
    (the mask of each case) that was most of the CPU of finding a smoke set. The same strategy draws the same
    values from the same choices, so reusing it changes no draw. Sequences are keyed as tuples."""
    built = functools.cache(factory)

    @functools.wraps(factory)
    def reused(*args, **kwargs):
        args = tuple(tuple(a) if isinstance(a, list) else a for a in args)
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
        return built(*args, **kwargs)

    return reused  # type: ignore[return-value]


# Tile sizes whose edges mask boundaries are drawn at when a case's own tiles are not known yet
# (the block sizes are drawn after the mask): the lane tile the Pallas TPU kernels cut sequences into.
TILES = (128,)


def tile_edges(*, length: int, tiles: Sequence[int] = TILES) -> tuple[int, ...]:
    """Positions in [1, length - 1] where tiles of the given sizes meet, one before and one past
    each, and the middle of each tile (inside an inner key step): where a boundary is most likely
    handled apart."""
    if length < 1 or any(t < 1 for t in tiles):
        raise ValueError(f"length={length} and tiles={tuple(tiles)} must be >= 1")
    edges = {m + d for t in tiles for m in range(t, length, t) for d in (-1, 0, 1)}
    edges |= {m + t // 2 for t in tiles if t > 1 for m in range(0, length, t)}
    return tuple(sorted(e for e in edges if 0 < e < length))


@_reused
def _position(length: int, tiles: Sequence[int]) -> st.SearchStrategy[int]:
    """A position in [1, length - 1]: at a tile edge (tile_edges) or anywhere."""
    edges = tile_edges(length=length, tiles=tiles)
    anywhere = st.integers(1, length - 1)
    return st.sampled_from(edges) | anywhere if edges else anywhere


@_reused
def segment_runs(
    *, length: int, max_segments: int = 3, tiles: Sequence[int] = TILES
) -> st.SearchStrategy[tuple[int, ...]]:
    """Run lengths that sum to `length`, cut where tiles meet (tile_edges) or at arbitrary positions."""
    if length < 1 or max_segments < 1:
        raise ValueError(f"length={length} and max_segments={max_segments} must be >= 1")
    cuts = st.lists(_position(length, tiles), unique=True, max_size=max_segments - 1) if length > 1 else st.just([])
    return cuts.map(lambda cs: tuple(b - a for a, b in zip([0, *sorted(cs)], [*sorted(cs), length], strict=True)))


@_reused
@st.composite
def _segment_row(
    draw: st.DrawFn, q_len: int, kv_len: int, max_segments: int, orphans: bool, tiles: Sequence[int]
) -> tuple[tuple, tuple]:
    q_runs = draw(segment_runs(length=q_len, max_segments=max_segments, tiles=tiles))
    kv_runs = draw(segment_runs(length=kv_len, max_segments=max_segments, tiles=tiles))
    q_ids = list(range(len(q_runs)))
    if orphans and draw(st.booleans()):
        # A query segment absent from the keys: rows that see no key (declared convention).
        q_ids[-1] = ORPHAN_ID
    return tuple(zip(q_ids, q_runs, strict=True)), tuple(enumerate(kv_runs))


@_reused
def segments(
    *, batch: int, q_len: int, kv_len: int, max_segments: int = 3, orphans: bool = True, tiles: Sequence[int] = TILES
) -> st.SearchStrategy[Segments]:
    """Packed-sequence segment ids, changing where tiles meet or anywhere; with orphans, some draws
    give query rows that see no key."""
    rows = st.lists(_segment_row(q_len, kv_len, max_segments, orphans, tuple(tiles)), min_size=batch, max_size=batch)
    return rows.map(lambda rs: Segments(q=tuple(q for q, _ in rs), kv=tuple(kv for _, kv in rs)))


# Tile sizes of block-sparse patterns: the kernels' 128, and sizes that cut their tiles.
SPARSE_BLOCKS = (32, 64, 128, 96)
SPARSE_DENSITIES = (0.25, 0.5, 0.75)


@_reused
def _offsets(q_len: int, kv_len: int) -> st.SearchStrategy[int]:
    # 0 is top-left and kv_len - q_len bottom-right alignment; others shift the band
    # anywhere from "every row sees nothing" (-q_len) to "every row sees everything" (kv_len),
    # both corners sampled outright: an integer range reaches its ends only by chance.
    return st.sampled_from(sorted({0, kv_len - q_len, -q_len, kv_len})) | st.integers(-q_len, kv_len)


# Window sides drawn outright: none, one, a few keys, and one short of, at and one past a lane tile
# (a window edge where the kernels' tiles meet).
_SIDES = (0, 1, 7, 127, 128, 129)


@_reused
def windows(*, q_len: int, kv_len: int, causal: bool = False, aligned: bool = False) -> st.SearchStrategy[Window]:
    """Sliding windows (left, right, offset); causal=True: causal masks with an offset;
    aligned=True: offset 0 and both sides bounded (see harness.core.masks.WINDOW_ALIGNED)."""
    if causal:
        return st.builds(Window, left=st.none(), right=st.just(0), offset=_offsets(q_len, kv_len))
    if aligned:
        bounded = st.sampled_from([n for n in _SIDES if n <= kv_len]) | st.integers(0, kv_len)
        return st.builds(Window, left=bounded, right=bounded, offset=st.just(0))
    side = st.none() | st.sampled_from([n for n in _SIDES if n <= kv_len]) | st.integers(0, kv_len)
    both = st.tuples(side, side).filter(lambda lr: lr != (None, None) and lr != (None, 0))
    return st.builds(lambda lr, offset: Window(lr[0], lr[1], offset), both, _offsets(q_len, kv_len))


@_reused
def chunks(*, q_len: int, kv_len: int) -> st.SearchStrategy[Chunk]:
    """Chunk sizes, tile-aligned or not, from one position to the whole sequence."""
    longest = max(q_len, kv_len)
    return st.builds(Chunk, size=st.sampled_from(sorted({1, 64, 128, longest})) | st.integers(1, longest))


@_reused
@st.composite
def block_sparse(draw: st.DrawFn, *, q_len: int, kv_len: int) -> BlockSparse:
    """A random tile pattern of a given density (seeded, so it shrinks by the seed)."""
    bq = draw(st.sampled_from(SPARSE_BLOCKS))
    bk = draw(st.sampled_from(SPARSE_BLOCKS))
    density = draw(st.sampled_from(SPARSE_DENSITIES))
    seed = draw(st.integers(0, 2**16))
    tiles = np.random.default_rng(seed).random((-(-q_len // bq), -(-kv_len // bk))) < density
    return BlockSparse(bq, bk, tuple("".join("1" if t else "0" for t in row) for row in tiles))


# Page and tile sizes that valid lengths are aligned to (and one past): paged kernels cut
# their KV cache into pages of these sizes (harness.core.paging), so a length on or just past a
# page boundary is drawable whatever page size the kernel's strategy picks.
ALIGNMENTS = (8, 16, 32, 64, 128)


@_reused
def valid_lengths(*, length: int, tiles: Sequence[int] = ()) -> st.SearchStrategy[int]:
    """One row's valid length in [0, length]: 0, 1, aligned, one past aligned, the maximum, where
    the case's `tiles` meet or inside one (tile_edges), or any."""
    if length < 1:
        raise ValueError(f"length={length} must be >= 1")
    aligned = {m + d for a in ALIGNMENTS for m in range(a, length + 1, a) for d in (0, 1)}
    aligned |= set(tile_edges(length=length, tiles=tiles)) if tiles else set()
    special = sorted({0, 1, length} | {n for n in aligned if n <= length})
    return st.sampled_from(special) | st.integers(0, length)


@_reused
@st.composite
def lengths(
    draw: st.DrawFn,
    *,
    components: frozenset[str],
    batch: int,
    q_len: int,
    kv_len: int,
    restrictions: frozenset[str] = frozenset(),
    tiles: Sequence[int] = (),
    every_side: bool = False,
) -> Lengths:
    """Per-row valid lengths for the sides named in `components` (q_lengths, kv_lengths, kv_starts),
    inside `restrictions` (harness.core.masks.RESTRICTIONS); `tiles`: the case's tile sizes (valid_lengths).

    Where several sides are named, one of them alone or all of them: an API whose length parameters
    are optional one by one must meet each without the others (jax.nn.dot_product_attention zeroed
    padded query rows only when both lengths were given, docs/history.md NN-2). A shrink goes to the
    first side alone. every_side: every named side (a pooled case keeps its entry's sides: which are
    given is compiled in, harness.core.pool.program_key)."""
    kw = {}
    sides = (("q_lengths", "q", q_len), ("kv_lengths", "kv", kv_len), ("kv_starts", "kv_starts", kv_len))
    named = [name for name, _, _ in sides if name in components]
    alone = draw(st.sampled_from([*named, None])) if len(named) > 1 and not every_side else None
    for name, side, length in sides:
        if name in components and alone in (None, name):
            rows = st.lists(valid_lengths(length=length, tiles=tiles), min_size=batch, max_size=batch).map(tuple)
            kw[side] = draw(rows)
    if not kw:
        raise ValueError(f"components={sorted(components)} name none of {LENGTH_COMPONENTS}")
    if LENGTHS_Q_LE_KV in restrictions:
        kv = kw.get("kv") or (kv_len,) * batch
        kw["q"] = tuple(min(q, k) for q, k in zip(kw.get("q") or (q_len,) * batch, kv, strict=True))
    return Lengths(**kw)


def sliding_window(size: int, rows: Lengths | None, q_len: int, kv_len: int) -> dict:
    """Mask keyword arguments for a causal sliding window of `size` keys (harness.core.masks.SLIDING_WINDOW):
    the window at diagonal kv_len - q_len, and each row's queries moved to that diagonal
    (q[b] = kv[b] - (kv_len - q_len), none where the row holds fewer keys)."""
    if size < 1:
        raise ValueError(f"sliding window size={size} must be >= 1")
    out: dict = {"window": Window(left=size - 1, right=0, offset=kv_len - q_len)}
    if rows is not None:
        if rows.kv_starts is not None:
            raise ValueError(f"a sliding window is defined over keys from 0; got kv_starts={rows.kv_starts}")
        kv = rows.kv if rows.kv is not None else (kv_len,) * len(rows.q)
        out["lengths"] = Lengths(q=tuple(max(0, n - (kv_len - q_len)) for n in kv), kv=rows.kv)
    return out


@_reused
def _static(
    kinds: list[str], q_len: int, kv_len: int, *, required: bool = False, aligned: bool = False
) -> st.SearchStrategy[dict]:
    """Keyword arguments of Mask for one shape component (or none, unless required)."""
    options: list[st.SearchStrategy[dict]] = [] if required and kinds else [st.just({})]
    for kind in kinds:
        if kind.startswith("causal_") and kind != "causal_offset":
            options.append(st.just({"causal": kind.removeprefix("causal_")}))
        elif kind in ("causal_offset", "window"):
            w = windows(q_len=q_len, kv_len=kv_len, causal=kind == "causal_offset", aligned=aligned)
            options.append(w.map(lambda w: {"window": w}))
        elif kind == "chunk":
            options.append(chunks(q_len=q_len, kv_len=kv_len).map(lambda c: {"chunk": c}))
        elif kind == "block_sparse":
            options.append(block_sparse(q_len=q_len, kv_len=kv_len).map(lambda b: {"block_sparse": b}))
    return st.one_of(options)


def shape_kinds(components: frozenset[str], restrictions: frozenset[str], *, queries_past_keys: bool) -> list[str]:
    """The shape components a mask is drawn with (one of them, or none unless SHAPE_REQUIRED), in the order
    Hypothesis shrinks towards: the first is the plainest mask of a kernel that requires one."""
    kinds = [k for k in SHAPE_COMPONENTS if k in components]
    if CAUSAL_Q_LE_KV in restrictions and queries_past_keys:
        kinds = [k for k in kinds if not k.startswith("causal")]
    if SLIDING_WINDOW in restrictions:
        kinds = [k for k in kinds if k != "window"]  # a sliding window comes on top of causal, below
    return kinds


@_reused
@st.composite
def masks(
    draw: st.DrawFn,
    *,
    components: frozenset[str],
    batch: int,
    q_len: int,
    kv_len: int,
    heads: int = 1,
    restrictions: frozenset[str] = frozenset(),
) -> Mask:
    """Masks made only of the given components (names as in Mask.components), inside `restrictions`.

    One shape component (causal, window, chunk or block-sparse) or none; with "per_head",
    sometimes a different one per query head instead; segments independently. With
    SLIDING_WINDOW, windows come only as a sliding window on top of bottom-right causal.
    """
    kinds = shape_kinds(components, restrictions, queries_past_keys=q_len > kv_len)
    aligned = WINDOW_ALIGNED in restrictions
    kw = dict(draw(_static(kinds, q_len, kv_len, required=SHAPE_REQUIRED in restrictions, aligned=aligned)))
    if components & set(LENGTH_COMPONENTS) and draw(st.booleans()):
        sides = {"batch": batch, "q_len": q_len, "kv_len": kv_len}
        kw["lengths"] = draw(lengths(components=components, restrictions=restrictions, **sides))
    if SLIDING_WINDOW in restrictions and kw.get("causal") == "bottom_right" and draw(st.booleans()):
        kw.update(sliding_window(draw(valid_lengths(length=kv_len - 1)) + 1, kw.get("lengths"), q_len, kv_len))
    if "per_head" in components and draw(st.booleans()):
        per_head = st.lists(_static(kinds, q_len, kv_len, aligned=aligned), min_size=heads, max_size=heads)
        kw["heads"] = tuple(Mask(**h) for h in draw(per_head))
    if "segments" in components and draw(st.booleans()):
        if SEGMENTS_SHARED not in restrictions or q_len == kv_len:
            kw["segments"] = draw(_segments_of(restrictions, batch=batch, q_len=q_len, kv_len=kv_len))
    mask = Mask(**kw)
    # Rare (a window or per-head masks beside the whole key range): rejected, not redrawn by hand.
    assume(SOME_KEY_VISIBLE not in restrictions or shows_some_key(mask, batch=batch, q_len=q_len, kv_len=kv_len))
    return mask


@_reused
def _segments_of(
    restrictions: frozenset[str], *, batch: int, q_len: int, kv_len: int, tiles: Sequence[int] = TILES
) -> st.SearchStrategy[Segments]:
    # SEGMENTS_SHARED: one set of ids for queries and keys (q_len == kv_len), no orphans.
    if SEGMENTS_SHARED in restrictions:
        shared = segments(batch=batch, q_len=q_len, kv_len=q_len, orphans=False, tiles=tiles)
        return shared.map(lambda s: Segments(q=s.q, kv=s.q))
    return segments(batch=batch, q_len=q_len, kv_len=kv_len, tiles=tiles)


def _kv_formats(caps: Capabilities, dtype: str) -> tuple[str | None, ...]:
    # A dtype the implementation takes only with quantized K/V never draws plain K/V.
    return caps.kv_formats if dtype in caps.kv_format_only_dtypes else (None, *caps.kv_formats)


@st.composite
def _cases(draw: st.DrawFn, impl: Implementation, dtypes: tuple[str, ...] | None, regimes: tuple[str, ...]) -> Case:
    caps: Capabilities = impl.capabilities
    batch = draw(st.integers(1, caps.max_batch))
    kv_heads = draw(st.integers(1, caps.max_kv_heads))
    group = draw(st.sampled_from([g for g in (1, 2, 4) if g <= caps.max_group]))
    q_len = draw(st.sampled_from(caps.q_lens or caps.seq_lens))
    kv_len = draw(st.sampled_from(caps.seq_lens)) if caps.unequal_lengths else q_len
    shape = {"batch": batch, "q_len": q_len, "kv_len": kv_len, "heads": kv_heads * group}
    mask = draw(masks(components=caps.mask_components, restrictions=caps.restrictions, **shape))
    head_dim = draw(st.sampled_from(caps.head_dims))
    dtype = draw(st.sampled_from(dtypes or caps.dtypes))
    bias = "bias" in caps.mask_components and draw(st.booleans())
    regime, scale = _regime_and_scale(draw, regimes, draw(st.none() | st.sampled_from(SCALES)), head_dim)
    case = Case(
        batch=batch,
        q_heads=kv_heads * group,
        kv_heads=kv_heads,
        q_len=q_len,
        kv_len=kv_len,
        head_dim=head_dim,
        dtype=dtype,
        mask=mask,
        bias=bias,
        scale=scale,
        regime=regime,
        seed=draw(st.integers(0, 2**16)),
        kv_format=draw(st.sampled_from(_kv_formats(caps, dtype))),
        # Drawn only where declared, so the cases of every other implementation stay as they were.
        soft_cap=draw(st.none() | st.sampled_from(SOFT_CAPS)) if caps.soft_cap else None,
        sinks=draw(st.booleans()) if caps.sinks else False,
        residuals=draw(st.booleans()) if caps.residuals else False,
    )
    blocks = impl.block_strategy(case)
    return case.replace(blocks=tuple(draw(blocks).items())) if blocks is not None else case


# One in this many pooled cases draws its regime from all, not its entry's planned one.
FREE_REGIME_ONE_IN = 8


@st.composite
def _reusing(draw: st.DrawFn, impl: Implementation, skeleton: Case, regimes: tuple[str, ...]) -> Case:
    """`skeleton` with what its compiled programs take as data drawn anew: the values (seed,
    regime, so bias values too), segment ids and valid lengths. Everything else, shapes, dtype,
    blocks, scale and the other mask components, stays (harness.core.pool.program_key)."""
    caps = impl.capabilities
    mask, shape = skeleton.mask, {"batch": skeleton.batch, "q_len": skeleton.q_len, "kv_len": skeleton.kv_len}
    # The skeleton's own tiles (its block sizes, inner key steps included): boundaries where they meet.
    tiles = tuple(sorted({n for _, n in skeleton.blocks if n > 1} | set(TILES)))
    if mask.segments is not None:
        mask = dataclasses.replace(mask, segments=draw(_segments_of(caps.restrictions, **shape, tiles=tiles)))
    # A sliding window's query lengths follow from its key lengths (sliding_window): kept as drawn.
    if mask.lengths is not None and mask.window is None:
        sides = mask.lengths.components  # the entry's own sides: which are given is compiled in
        lens = lengths(components=sides, restrictions=caps.restrictions, **shape, tiles=tiles, every_side=True)
        mask = dataclasses.replace(mask, lengths=draw(lens))
    assume(SOME_KEY_VISIBLE not in caps.restrictions or shows_some_key(mask, **shape))
    # The skeleton's scale is compiled in: only the regimes a whole draw pairs with it (an extreme regime
    # where it is a power of two; an ordinary one never with an extreme regime's limit scale).
    regimes = tuple(r for r in regimes if takes_scale(r, skeleton.scale, skeleton.head_dim))
    assume(regimes)
    # The skeleton's own regime is its pool's plan (harness.core.pool._planned), taken by all but one in
    # FREE_REGIME_ONE_IN draws, so that a shard's few cases meet every regime beside every feature; the
    # others draw one of all, as a shrink does (towards 0: the first regime, "normal").
    planned = skeleton.regime in regimes and draw(st.integers(0, FREE_REGIME_ONE_IN - 1)) > 0
    regime = skeleton.regime if planned else draw(st.sampled_from(regimes))
    return skeleton.replace(mask=mask, regime=regime, seed=draw(st.integers(0, 2**16)))


@st.composite
def _pooled(draw: st.DrawFn, impl: Implementation, regimes: tuple[str, ...], pool: tuple) -> Case:
    # The entry is the first choice: the shrinker moves it towards 0, the pool's smallest entry.
    return draw(_reusing(impl, draw(st.sampled_from(pool)), regimes))


def cases(
    impl: Implementation,
    *,
    dtypes: tuple[str, ...] | None = None,
    regimes: tuple[str, ...] = REGIMES,
    pool: Sequence[Case] | None = None,
) -> st.SearchStrategy[Case]:
    """Cases inside `impl`'s contract; `dtypes` narrows the declared dtypes.

    pool: skeleton cases (harness.core.pool.draw_pool), smallest first: every case takes one
    entry's compile-relevant part and draws its data anew, so that compiled programs are reused
    within a run; a failure shrinks towards the first entries.
    """
    if dtypes is not None:
        unsupported = set(dtypes) - set(impl.capabilities.dtypes)
        if unsupported:
            raise ValueError(
                f"dtypes {sorted(unsupported)} are not supported by {impl.name}: {impl.capabilities.dtypes}"
            )
    unknown = set(regimes) - set(REGIMES)
    if unknown:
        raise ValueError(f"regimes {sorted(unknown)} are unknown; choose from {REGIMES}")
    regimes = tuple(r for r in regimes if r in impl.capabilities.regimes)
    if not regimes:
        raise ValueError(f"{impl.name} is held to none of these regimes; it declares {impl.capabilities.regimes}")
    if pool is None:
        return _cases(impl, dtypes, regimes)
    pool = tuple(pool)
    if not pool:
        raise ValueError("pool=() is empty; pass None to draw every case whole, or at least one case")
    for case in pool:
        outside = [f"dtype={case.dtype!r} is not among dtypes={dtypes}"] if dtypes and case.dtype not in dtypes else []
        outside += impl.violations(case)
        if outside:
            raise ValueError(f"pool case {case} is outside {impl.name}'s contract: {'; '.join(outside)}")
    return _pooled(impl, regimes, pool)
