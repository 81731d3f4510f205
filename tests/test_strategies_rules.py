"""The validity rules of harness.core.strategies, each checked on its own sub-strategy or rule
function, with a stand-in implementation instead of a real kernel's contract.

These run in a second or two in all, so `nox -s mutation` can afford them for every mutant of
the strategies; the whole-case draws of test_strategies.py and test_strategies_masks.py cost
tens of seconds and are marked no_mutation. "Drawn outright" below means a value comes from
the strategy's own short list of corners, not only when an integer range happens to land on
it: derandomized draws make each share the same on every run.
"""

from __future__ import annotations

import ast
import re

import pytest
from hypothesis import HealthCheck, find, given, seed, settings
from hypothesis import strategies as st

from harness.core.case import REGIMES, Case
from harness.core.contract import Capabilities, Conventions, Implementation
from harness.core.masks import (
    CAUSAL_Q_LE_KV,
    LENGTHS_Q_LE_KV,
    RESTRICTIONS,
    SEGMENTS_SHARED,
    SHAPE_COMPONENTS,
    SHAPE_REQUIRED,
    SLIDING_WINDOW,
    SOME_KEY_VISIBLE,
    WINDOW_ALIGNED,
    Chunk,
    Lengths,
    Mask,
    Window,
    shows_some_key,
)
from harness.core.strategies import (
    EXACT_SCALES,
    LIMIT_SCALES,
    ORPHAN_ID,
    SCALES,
    SOFT_CAPS,
    SPARSE_BLOCKS,
    SPARSE_DENSITIES,
    _kv_formats,
    _static,
    block_sparse,
    cases,
    chunks,
    lengths,
    masks,
    segment_runs,
    segments,
    sliding_window,
    valid_lengths,
    windows,
)

# Draws come from one fixed seed, the same in every run; each "some draw shows X" below also
# held under five other seeds (3 to 7), so it rests on how often X is drawn, not on one lucky
# sequence.
SEED = 16


def draws(strategy: st.SearchStrategy, n: int = 100) -> list:
    """`n` draws, ten to an example: Hypothesis runs each distinct example once, so one value
    an example would stop early where the strategy has few values."""
    out: list = []

    @seed(SEED)
    @settings(max_examples=-(-n // 10), database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(strategy, min_size=10, max_size=10))
    def collect(xs: list) -> None:
        out.extend(xs)

    collect()
    return out


def outright(strategy: st.SearchStrategy) -> list[list]:
    """The corner lists a strategy draws outright: each `sampled_from` in Hypothesis's own
    description of it (its repr), in order. A corner also reachable through an integer range
    is drawn there only by chance; these lists are what make it common."""
    found = re.findall(r"sampled_from\((\[[^]]*\]|\([^)]*\))\)", repr(strategy))
    return [list(ast.literal_eval(items)) for items in found]


def ranges(strategy: st.SearchStrategy) -> list[tuple[int, int]]:
    """The integer ranges in Hypothesis's description of a strategy, in order."""
    found = re.findall(r"integers\(min_value=(-?\d+), max_value=(-?\d+)\)", repr(strategy))
    return [(int(lo), int(hi)) for lo, hi in found]


def test_segment_runs_cut_anywhere_into_at_most_max_segments() -> None:
    assert ranges(segment_runs(length=10, max_segments=3)) == [(1, 9)]  # a cut between any two positions
    runs = draws(segment_runs(length=10, max_segments=3), 150)
    assert all(sum(r) == 10 and min(r) >= 1 and len(r) <= 3 for r in runs)
    assert {len(r) for r in runs} == {1, 2, 3}
    assert any(r[0] == 1 for r in runs) and any(r[-1] == 1 for r in runs)  # cuts at both ends
    assert set(draws(segment_runs(length=1, max_segments=1), 10)) == {(1,)}
    assert set(draws(segment_runs(length=2, max_segments=2), 20)) == {(2,), (1, 1)}
    assert "max_size=2" in repr(segment_runs(length=10))  # three segments unless told otherwise


@pytest.mark.parametrize("orphans", [True, False, None], ids=["orphans", "no-orphans", "default"])
def test_segment_ids_count_up_and_only_the_last_query_run_is_orphaned(orphans: bool | None) -> None:
    kw = {} if orphans is None else {"orphans": orphans}
    drawn = draws(segments(batch=2, q_len=8, kv_len=12, **kw), 100)
    orphaned = False
    for segs in drawn:
        assert len(segs.q) == len(segs.kv) == 2
        assert segs.lengths("q") == (8, 8) and segs.lengths("kv") == (12, 12)
        for q_runs, kv_runs in zip(segs.q, segs.kv, strict=True):
            assert [i for i, _ in kv_runs] == list(range(len(kv_runs)))
            q_ids = [i for i, _ in q_runs]
            assert q_ids[:-1] == list(range(len(q_ids) - 1))
            assert q_ids[-1] in (len(q_ids) - 1, ORPHAN_ID)
            orphaned |= q_ids[-1] == ORPHAN_ID
    assert orphaned == (orphans is not False)  # orphans by default
    # At most three segments a side by default, and three are drawn.
    assert max(len(runs) for segs in drawn for runs in (*segs.q, *segs.kv)) == 3


WQ, WK = 16, 48  # as in test_strategies.py: offsets -16 (nothing visible) .. 48 (everything)
CORNERS = [-WQ, 0, WK - WQ, WK]  # nothing visible, top-left, bottom-right, everything


def test_causal_windows_draw_each_offset_corner_outright() -> None:
    strategy = windows(q_len=WQ, kv_len=WK, causal=True)
    assert outright(strategy) == [CORNERS] and ranges(strategy) == [(-WQ, WK)]
    ws = draws(strategy, 200)
    assert all(w.left is None and w.right == 0 and -WQ <= w.offset <= WK for w in ws)
    assert {w.offset for w in ws} >= set(CORNERS) and len({w.offset for w in ws}) > 10


def test_banded_windows_draw_unbounded_and_small_sides_outright() -> None:
    strategy = windows(q_len=WQ, kv_len=WK)
    assert outright(strategy) == [[0, 1, 7], [0, 1, 7], CORNERS]
    assert ranges(strategy) == [(0, WK), (0, WK), (-WQ, WK)]
    ws = draws(strategy, 300)
    for side in ("left", "right"):
        assert {getattr(w, side) for w in ws} >= {None, 0, 1, 7}
        assert all(getattr(w, side) is None or 0 <= getattr(w, side) <= WK for w in ws)
    assert {w.offset for w in ws} >= set(CORNERS) and all(-WQ <= w.offset <= WK for w in ws)
    assert not any((w.left, w.right) in ((None, None), (None, 0)) for w in ws)  # no mask, or the causal kind
    assert any(w.left is None and w.right == 1 for w in ws) and any(w.left == 0 and w.right is None for w in ws)


def test_aligned_windows_are_bounded_on_the_diagonal() -> None:
    strategy = windows(q_len=WQ, kv_len=WK, aligned=True)
    assert outright(strategy) == [[0, 1, 7], [0, 1, 7]] and ranges(strategy) == [(0, WK), (0, WK)]
    ws = draws(strategy, 200)
    assert all(w.offset == 0 and 0 <= w.left <= WK and 0 <= w.right <= WK for w in ws)
    for side in ("left", "right"):
        assert {getattr(w, side) for w in ws} >= {0, 1, 7}


def test_chunks_run_from_one_position_to_the_longer_sequence() -> None:
    assert outright(chunks(q_len=16, kv_len=200)) == [[1, 64, 128, 200]]
    assert outright(chunks(q_len=200, kv_len=16)) == [[1, 64, 128, 200]]
    assert ranges(chunks(q_len=16, kv_len=200)) == [(1, 200)]
    sizes = {c.size for c in draws(chunks(q_len=16, kv_len=200), 200)}
    assert min(sizes) == 1 and max(sizes) <= 200 and len(sizes) > 10


def test_block_sparse_patterns_tile_the_plane_at_the_drawn_density() -> None:
    drawn = draws(block_sparse(q_len=4096, kv_len=2048), 60)
    for p in drawn:
        assert len(p.pattern) == -(-4096 // p.block_q)
        assert {len(row) for row in p.pattern} == {-(-2048 // p.block_kv)}
        ones = sum(row.count("1") for row in p.pattern) / sum(len(row) for row in p.pattern)
        # At least 16 x 16 tiles: the share of visible tiles is within 0.1 of a declared density.
        assert min(abs(ones - d) for d in SPARSE_DENSITIES) < 0.1, ones
        assert set("".join(p.pattern)) <= {"0", "1"}
    assert {p.block_q for p in drawn} == {p.block_kv for p in drawn} == set(SPARSE_BLOCKS)
    # Row and column counts that are not whole tiles round up: 100 = 32 * 3 + 4.
    for p in draws(block_sparse(q_len=100, kv_len=100), 20):
        assert len(p.pattern) == -(-100 // p.block_q) and len(p.pattern[0]) == -(-100 // p.block_kv)


def test_valid_lengths_draw_zero_one_pages_one_past_and_the_maximum_outright() -> None:
    # Multiples of 8, 16 and 32 up to 33 and one past each; the maximum 33 is one past 32.
    assert outright(valid_lengths(length=33)) == [[0, 1, 8, 9, 16, 17, 24, 25, 32, 33]]
    assert outright(valid_lengths(length=40)) == [[0, 1, 8, 9, 16, 17, 24, 25, 32, 33, 40]]
    assert outright(valid_lengths(length=1)) == [[0, 1]]
    assert ranges(valid_lengths(length=40)) == [(0, 40)]
    drawn = set(draws(valid_lengths(length=40), 200))
    assert min(drawn) == 0 and max(drawn) == 40 and len(drawn) > 20


@pytest.mark.parametrize(
    ("component", "side", "length"),
    [("q_lengths", "q", 16), ("kv_lengths", "kv", 64), ("kv_starts", "kv_starts", 64)],
)
def test_lengths_fill_only_the_named_side(component: str, side: str, length: int) -> None:
    drawn = draws(lengths(components=frozenset({component}), batch=3, q_len=16, kv_len=64), 60)
    for got in drawn:
        rows = getattr(got, side)
        assert len(rows) == 3 and all(0 <= n <= length for n in rows)
        assert all(getattr(got, other) is None for other in ("q", "kv", "kv_starts") if other != side)
    assert any(length in getattr(got, side) for got in drawn)


def test_lengths_of_several_sides_give_each_side_alone_and_all_together() -> None:
    # NN-2 (docs/history.md): query lengths without key lengths took another path in
    # jax.nn.dot_product_attention; a generator that gave both sides always never met it.
    both = frozenset({"q_lengths", "kv_lengths"})
    drawn = {got.components for got in draws(lengths(components=both, batch=2, q_len=16, kv_len=64), 60)}
    assert drawn == {frozenset({"q_lengths"}), frozenset({"kv_lengths"}), both}
    every = draws(lengths(components=both, batch=2, q_len=16, kv_len=64, every_side=True), 30)
    assert {got.components for got in every} == {both}
    # A shrink goes to the first side alone.
    smallest = find(
        lengths(components=both, batch=1, q_len=16, kv_len=64), lambda _: True, settings=settings(database=None)
    )
    assert smallest.components == {"q_lengths"}


def test_lengths_q_le_kv_clamps_queries_to_the_keys() -> None:
    for got in draws(lengths(**split({"kv_lengths", LENGTHS_Q_LE_KV}), batch=2, q_len=64, kv_len=64)):
        assert got.q == got.kv  # every query position up to the row's keys: min(64, kv)
    clamped = draws(lengths(**split({"q_lengths", LENGTHS_Q_LE_KV}), batch=2, q_len=64, kv_len=16))
    assert all(got.kv is None and max(got.q) <= 16 for got in clamped)
    assert any(16 in got.q for got in clamped)


def test_valid_lengths_of_nothing_say_the_minimum() -> None:
    with pytest.raises(ValueError, match=r"^length=0 must be >= 1$"):
        valid_lengths(length=0)


def test_lengths_without_a_length_component_say_which_are_known() -> None:
    with pytest.raises(ValueError, match=r"components=\['segments'\] name none of"):
        draws(lengths(components=frozenset({"segments"}), batch=1, q_len=8, kv_len=8), 1)


def test_sliding_window_sits_on_the_bottom_right_diagonal() -> None:
    assert sliding_window(4, None, 16, 48) == {"window": Window(left=3, right=0, offset=32)}
    assert sliding_window(1, None, 16, 16) == {"window": Window(left=0, right=0, offset=0)}
    got = sliding_window(4, Lengths(kv=(40, 10)), 16, 48)
    assert got["lengths"] == Lengths(q=(8, 0), kv=(40, 10))  # kv - 32, none where under 32 keys
    got = sliding_window(4, Lengths(q=(5, 6)), 16, 48)
    assert got["lengths"] == Lengths(q=(16, 16), kv=None)  # no kv lengths: every row holds 48 keys
    with pytest.raises(ValueError, match="size=0 must be >= 1"):
        sliding_window(0, None, 16, 48)
    with pytest.raises(ValueError, match=r"kv_starts=\(1,\)"):
        sliding_window(4, Lengths(kv_starts=(1,)), 16, 48)


# What each shape component puts in Mask's keyword arguments.
SHAPE_KEYWORDS = {
    "causal_top_left": lambda kw: kw == {"causal": "top_left"},
    "causal_bottom_right": lambda kw: kw == {"causal": "bottom_right"},
    "causal_offset": lambda kw: set(kw) == {"window"} and kw["window"].is_causal,
    "window": lambda kw: set(kw) == {"window"} and not kw["window"].is_causal,
    "chunk": lambda kw: set(kw) == {"chunk"} and isinstance(kw["chunk"], Chunk),
    "block_sparse": lambda kw: set(kw) == {"block_sparse"},
}


@pytest.mark.parametrize("kind", SHAPE_COMPONENTS)
def test_each_shape_component_draws_its_own_keyword_or_none(kind: str) -> None:
    drawn = draws(_static([kind], WQ, WK), 40)
    assert {} in drawn and any(SHAPE_KEYWORDS[kind](kw) for kw in drawn)
    assert all(kw == {} or SHAPE_KEYWORDS[kind](kw) for kw in drawn)
    assert {} not in draws(_static([kind], WQ, WK, required=True), 40)


def test_a_required_shape_with_no_kind_to_draw_is_no_shape() -> None:
    assert all(kw == {} for kw in draws(_static([], WQ, WK, required=True), 10))


def test_aligned_shape_windows_are_on_the_diagonal() -> None:
    drawn = draws(_static(["window"], WQ, WK, required=True, aligned=True), 40)
    assert all(kw["window"].offset == 0 and kw["window"].left is not None for kw in drawn)
    unaligned = draws(_static(["window"], WQ, WK, required=True), 40)  # the default: any band
    assert any(kw["window"].offset != 0 for kw in unaligned)


def split(names: set[str]) -> dict[str, frozenset[str]]:
    """A declaration's names as the strategies take them: mask components, and restrictions apart."""
    restrictions = frozenset(names) & frozenset(RESTRICTIONS)
    return {"components": frozenset(names) - restrictions, "restrictions": restrictions}


def mask_draws(components: set[str], q_len: int = WQ, kv_len: int = WK, n: int = 100, heads: int = 1) -> list[Mask]:
    return draws(masks(**split(components), batch=2, q_len=q_len, kv_len=kv_len, heads=heads), n)


def test_masks_draw_only_declared_shapes_sometimes_none() -> None:
    drawn = mask_draws({"causal_top_left", "chunk", "segments"})
    shapes = {m.components - {"segments"} for m in drawn}
    assert shapes == {frozenset(), frozenset({"causal_top_left"}), frozenset({"chunk"})}
    assert all(m.lengths is None and m.heads is None for m in drawn)
    assert any(m.segments is not None for m in drawn) and any(m.segments is None for m in drawn)
    assert any(m.segments is not None and m.segments.q != m.segments.kv for m in drawn)


def test_masks_with_a_required_shape_always_have_one() -> None:
    assert all(m.components & set(SHAPE_COMPONENTS) for m in mask_draws({"window", "chunk", SHAPE_REQUIRED}))


def test_masks_draw_causal_beyond_the_keys_only_where_declared() -> None:
    components = {"causal_top_left", "causal_offset", "chunk", CAUSAL_Q_LE_KV}
    assert not any(m.causal or m.window for m in mask_draws(components, q_len=64, kv_len=16))
    assert any(m.causal for m in mask_draws(components, q_len=16, kv_len=16))
    assert any(m.causal for m in mask_draws(components - {CAUSAL_Q_LE_KV}, q_len=64, kv_len=16))


def test_masks_draw_aligned_windows_on_every_head() -> None:
    drawn = mask_draws({"window", "per_head", WINDOW_ALIGNED}, heads=3, n=150)
    windows_drawn = [w for m in drawn for w in (m.window, *(h.window for h in m.heads or ()))]
    assert all(w is None or w.offset == 0 for w in windows_drawn)
    assert any(m.heads is not None and any(h.window for h in m.heads) for m in drawn)
    assert all(m.heads is None or len(m.heads) == 3 for m in drawn)
    assert any(m.heads is None for m in drawn)


def test_masks_draw_lengths_sometimes_where_declared() -> None:
    drawn = mask_draws({"kv_lengths", "chunk"})
    assert any(m.lengths is not None for m in drawn) and any(m.lengths is None for m in drawn)
    assert all(m.lengths is None or (m.lengths.kv is not None and m.lengths.q is None) for m in drawn)


def test_masks_draw_sliding_windows_only_on_bottom_right_causal() -> None:
    drawn = mask_draws({"causal_bottom_right", "window", "kv_lengths", SLIDING_WINDOW}, q_len=16, kv_len=48, n=200)
    sliding = [m for m in drawn if m.window is not None]
    assert all(m.causal == "bottom_right" and m.window.right == 0 and m.window.offset == 32 for m in sliding)
    assert any(m.causal == "bottom_right" and m.window is None for m in drawn)
    assert any(m.lengths is not None and m.lengths.q is not None for m in sliding)  # queries moved with the keys
    # A shape on every mask: half of them a sliding window, of 1 to 48 keys.
    drawn = mask_draws({"causal_bottom_right", SLIDING_WINDOW, SHAPE_REQUIRED}, q_len=16, kv_len=48, n=300)
    sizes = {m.window.left + 1 for m in drawn if m.window is not None}
    assert min(sizes) == 1 and sizes <= set(range(1, 49)) and len(sizes) > 5


def test_masks_hide_every_key_only_where_no_restriction_forbids_it() -> None:
    components = {"causal_offset", "window", "per_head", "causal_bottom_right", "kv_lengths", "q_lengths"}
    hidden = [m for m in mask_draws(components, heads=2, n=300) if not shows_some_key(m, batch=2, q_len=WQ, kv_len=WK)]
    assert hidden  # without the restriction such masks are drawn, so the rule below is not vacuous
    kept = mask_draws(components | {SOME_KEY_VISIBLE}, heads=2, n=300)
    assert all(shows_some_key(m, batch=2, q_len=WQ, kv_len=WK) for m in kept)
    assert any(m.heads is not None for m in kept) and any(m.window is not None for m in kept)


def test_shows_some_key_reads_every_head_and_each_rows_diagonal() -> None:
    below = {"window": Window(left=None, right=0, offset=-WK)}  # causal below every key
    assert not shows_some_key(Mask(**below), batch=1, q_len=WQ, kv_len=WK)
    assert shows_some_key(Mask(), batch=1, q_len=WQ, kv_len=WK)
    # One head that sees a key is enough; a shared component hides it from every head.
    assert shows_some_key(Mask(heads=(Mask(**below), Mask())), batch=1, q_len=WQ, kv_len=WK)
    assert not shows_some_key(Mask(heads=(Mask(**below), Mask(**below))), batch=1, q_len=WQ, kv_len=WK)
    assert not shows_some_key(Mask(**below, heads=(Mask(), Mask())), batch=1, q_len=WQ, kv_len=WK)
    # Bottom-right causal with lengths: row 1's diagonal (0 keys past its queries, 16 below) hides every
    # key from a window that sees only keys 16 or more past the query; row 0's does not.
    ahead = Window(left=0, right=None, offset=16)
    rows = Lengths(q=(16, 16), kv=(48, 16))
    assert not shows_some_key(Mask(causal="bottom_right", window=ahead, lengths=rows), batch=2, q_len=16, kv_len=48)
    assert shows_some_key(Mask(causal="bottom_right", window=ahead, lengths=rows), batch=1, q_len=16, kv_len=48)


def test_shared_segments_are_one_sequence_on_both_sides() -> None:
    drawn = mask_draws({"segments", SEGMENTS_SHARED}, q_len=16, kv_len=16)
    shared = [m.segments for m in drawn if m.segments is not None]
    assert shared and all(s.q == s.kv and ORPHAN_ID not in (i for row in s.q for i, _ in row) for s in shared)
    assert any(len(row) > 1 for s in shared for row in s.q)
    assert all(m.segments is None for m in mask_draws({"segments", SEGMENTS_SHARED}, q_len=16, kv_len=48, n=30))


def caps(**changes: object) -> Capabilities:
    base = dict(dtypes=("float32", "bfloat16"), head_dims=(32, 64), seq_lens=(16, 48), mask_components=frozenset())
    return Capabilities(**{**base, **changes})


def test_kv_formats_leave_plain_kv_out_only_for_quantized_only_dtypes() -> None:
    c = caps(kv_formats=("int8",), kv_format_only_dtypes=("bfloat16",))
    assert _kv_formats(c, "bfloat16") == ("int8",)
    assert _kv_formats(c, "float32") == (None, "int8")
    assert _kv_formats(caps(), "float32") == (None,)


class Declared(Implementation):
    """A stand-in implementation: only its capabilities and block strategy are read."""

    name = "declared"
    role = "kernel"
    framework = "jax"
    conventions = Conventions(bias="none", causal="none", gqa="none", empty_rows="zeros")

    def __init__(self, capabilities: Capabilities, *, blocks: bool = False) -> None:
        self.capabilities = capabilities
        self.blocks = blocks

    def run(self, case, inputs, *, grads):  # pragma: no cover - never run
        raise AssertionError("strategies never run an implementation")

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]] | None:
        return st.fixed_dictionaries({"block_q": st.sampled_from((8, case.q_len))}) if self.blocks else None


def test_cases_draw_every_declared_value_and_nothing_else() -> None:
    impl = Declared(caps(max_batch=3, max_kv_heads=3, max_group=2, mask_components=frozenset({"bias"})))
    drawn = draws(cases(impl), 150)
    values = {field: {getattr(c, field) for c in drawn} for field in Case.__dataclass_fields__}
    assert values["batch"] == {1, 2, 3} and values["kv_heads"] == {1, 2, 3}
    assert {c.q_heads // c.kv_heads for c in drawn} == {1, 2} and all(c.q_heads % c.kv_heads == 0 for c in drawn)
    assert values["q_len"] == values["kv_len"] == {16, 48} and any(c.q_len != c.kv_len for c in drawn)
    assert values["head_dim"] == {32, 64} and values["dtype"] == {"float32", "bfloat16"}
    # The extreme-value regimes draw power-of-two scales of their own (strategies.EXACT_SCALES).
    extreme = {*EXACT_SCALES, *(s for scales in LIMIT_SCALES.values() for s in scales)}
    assert values["bias"] == {True, False} and values["scale"] == {None, *SCALES, *extreme}
    assert values["regime"] == set(REGIMES) and values["kv_format"] == {None}
    assert min(values["seed"]) >= 0 and max(values["seed"]) <= 2**16 and len(values["seed"]) > 10
    assert values["soft_cap"] == {None} and values["sinks"] == values["residuals"] == {False}
    assert all(c.blocks == () for c in drawn)
    assert all(c.mask == Mask() for c in drawn)


def test_cases_draw_declared_features_and_blocks() -> None:
    impl = Declared(
        caps(
            q_lens=(1,),
            unequal_lengths=True,
            kv_formats=("int8",),
            soft_cap=True,
            sinks=True,
            residuals=True,
            mask_components=frozenset({"causal_top_left"}),
            max_group=1,
        ),
        blocks=True,
    )
    drawn = draws(cases(impl, dtypes=("bfloat16",), regimes=("ties",)), 100)
    assert {c.q_len for c in drawn} == {1} and {c.kv_len for c in drawn} == {16, 48}
    assert {c.dtype for c in drawn} == {"bfloat16"} and {c.regime for c in drawn} == {"ties"}
    assert {c.kv_format for c in drawn} == {None, "int8"}
    assert {c.soft_cap for c in drawn} == {None, *SOFT_CAPS}
    assert {c.sinks for c in drawn} == {c.residuals for c in drawn} == {True, False}
    assert {c.block_dict["block_q"] for c in drawn} == {8, 1} and not any(c.bias for c in drawn)
    assert {c.q_heads for c in drawn} == {c.kv_heads for c in drawn} == {1, 2}
    assert any(c.mask.causal for c in drawn)
    equal = Declared(caps(unequal_lengths=False))
    assert all(c.q_len == c.kv_len for c in draws(cases(equal), 30))
