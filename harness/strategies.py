"""Hypothesis strategies for attention cases, built in layers, valid by construction.

Each layer reads the implementation's declared Capabilities, so a drawn case is
always inside its contract; block sizes come from the implementation's own
`block_strategy`, which knows its tiling rules.
"""

from __future__ import annotations

from hypothesis import strategies as st

from harness.case import REGIMES, Case
from harness.contract import Capabilities, Implementation
from harness.masks import Mask, Segments

__all__ = ["cases", "masks", "segment_runs", "segments"]

# Segment ids outside any key row's ids: queries with such an id see no key at all.
ORPHAN_ID = 99
# Scales besides the default 1/sqrt(head_dim): 1.0 is the Pallas kernel's own default
# (the largest logits), 0.03 flattens the softmax towards uniform.
SCALES = (1.0, 0.25, 0.03)


def segment_runs(*, length: int, max_segments: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    """Run lengths that sum to `length`, cut at arbitrary (not tile-aligned) positions."""
    if length < 1 or max_segments < 1:
        raise ValueError(f"length={length} and max_segments={max_segments} must be >= 1")
    cuts = st.lists(st.integers(1, length - 1), unique=True, max_size=max_segments - 1) if length > 1 else st.just([])
    return cuts.map(lambda cs: tuple(b - a for a, b in zip([0, *sorted(cs)], [*sorted(cs), length], strict=True)))


@st.composite
def _segment_row(draw: st.DrawFn, q_len: int, kv_len: int, max_segments: int) -> tuple[tuple, tuple]:
    q_runs = draw(segment_runs(length=q_len, max_segments=max_segments))
    kv_runs = draw(segment_runs(length=kv_len, max_segments=max_segments))
    q_ids = list(range(len(q_runs)))
    if draw(st.booleans()):
        # A query segment absent from the keys: rows that see no key (declared convention).
        q_ids[-1] = ORPHAN_ID
    return tuple(zip(q_ids, q_runs, strict=True)), tuple(enumerate(kv_runs))


def segments(*, batch: int, q_len: int, kv_len: int, max_segments: int = 3) -> st.SearchStrategy[Segments]:
    """Packed-sequence segment ids; some draws give query rows that see no key."""
    rows = st.lists(_segment_row(q_len, kv_len, max_segments), min_size=batch, max_size=batch)
    return rows.map(lambda rs: Segments(q=tuple(q for q, _ in rs), kv=tuple(kv for _, kv in rs)))


def masks(*, components: frozenset[str], batch: int, q_len: int, kv_len: int) -> st.SearchStrategy[Mask]:
    """Masks made only of the given components (names as in Mask.components)."""
    causal_options: list[str | None] = [None] + [a for a in ("top_left", "bottom_right") if f"causal_{a}" in components]
    seg = segments(batch=batch, q_len=q_len, kv_len=kv_len) if "segments" in components else st.none()
    return st.builds(Mask, causal=st.sampled_from(causal_options), segments=st.none() | seg)


@st.composite
def _cases(draw: st.DrawFn, impl: Implementation, dtypes: tuple[str, ...] | None, regimes: tuple[str, ...]) -> Case:
    caps: Capabilities = impl.capabilities
    batch = draw(st.integers(1, caps.max_batch))
    kv_heads = draw(st.integers(1, caps.max_kv_heads))
    group = draw(st.sampled_from([g for g in (1, 2, 4) if g <= caps.max_group]))
    q_len = draw(st.sampled_from(caps.seq_lens))
    kv_len = draw(st.sampled_from(caps.seq_lens)) if caps.unequal_lengths else q_len
    mask = draw(masks(components=caps.mask_components, batch=batch, q_len=q_len, kv_len=kv_len))
    case = Case(
        batch=batch,
        q_heads=kv_heads * group,
        kv_heads=kv_heads,
        q_len=q_len,
        kv_len=kv_len,
        head_dim=draw(st.sampled_from(caps.head_dims)),
        dtype=draw(st.sampled_from(dtypes or caps.dtypes)),
        mask=mask,
        bias="bias" in caps.mask_components and draw(st.booleans()),
        scale=draw(st.none() | st.sampled_from(SCALES)),
        regime=draw(st.sampled_from(regimes)),
        seed=draw(st.integers(0, 2**16)),
    )
    blocks = impl.block_strategy(case)
    return case.replace(blocks=tuple(draw(blocks).items())) if blocks is not None else case


def cases(
    impl: Implementation, *, dtypes: tuple[str, ...] | None = None, regimes: tuple[str, ...] = REGIMES
) -> st.SearchStrategy[Case]:
    """Cases inside `impl`'s contract; `dtypes` narrows the declared dtypes."""
    if dtypes is not None:
        unsupported = set(dtypes) - set(impl.capabilities.dtypes)
        if unsupported:
            raise ValueError(
                f"dtypes {sorted(unsupported)} are not supported by {impl.name}: {impl.capabilities.dtypes}"
            )
    unknown = set(regimes) - set(REGIMES)
    if unknown:
        raise ValueError(f"regimes {sorted(unknown)} are unknown; choose from {REGIMES}")
    return _cases(impl, dtypes, regimes)
