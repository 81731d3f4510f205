import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu import flash_attention as upstream

from harness.core.contract import resolve
from harness.core.inputs import make_inputs
from harness.core.masks import LENGTHS_Q_LE_KV, Mask, dense_mask, empty_rows
from harness.core.strategies import cases, lengths, segment_runs, segments, tile_edges, valid_lengths, windows
from harness.running.runner import run_case

FLASH = resolve("pallas_flash")


@pytest.mark.no_mutation
@settings(max_examples=300, deadline=None, database=None)
@given(cases(FLASH))
def test_every_drawn_flash_case_is_inside_its_contract(case):
    assert FLASH.violations(case) == []
    upstream.BlockSizes(**case.block_dict)  # the kernel's own validation of the tiling
    assert case.q_heads % case.kv_heads == 0


@pytest.mark.no_mutation
@settings(max_examples=2, deadline=None, database=None, derandomize=True)
@given(cases(FLASH, dtypes=("float32",)))
def test_drawn_cases_run_through_the_kernel(case):
    result = run_case(case, [FLASH])
    assert result.subjects[0].error is None, result.subjects[0].traceback


def blocks(case):
    return case.block_dict


@pytest.mark.no_mutation
@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda c: blocks(c)["block_k"] < blocks(c)["block_k_major"], id="block_k<block_k_major"),
        pytest.param(lambda c: c.kv_len // blocks(c)["block_k_major"] >= 3, id="several-kv-blocks"),
        pytest.param(lambda c: c.q_len // blocks(c)["block_q"] >= 3, id="several-q-blocks"),
        pytest.param(lambda c: blocks(c)["block_q_dkv"] < blocks(c)["block_q_major_dkv"], id="dkv-minor<major"),
        pytest.param(lambda c: blocks(c)["block_b"] == 2, id="batch-tile"),
        pytest.param(lambda c: c.kv_heads == 1 and c.q_heads == 4, id="mqa"),
        pytest.param(lambda c: c.q_len != c.kv_len and c.mask.causal == "top_left", id="causal-unequal"),
        pytest.param(lambda c: c.bias and c.dtype == "float16" and c.regime == "large", id="bias-fp16-large"),
        pytest.param(lambda c: c.mask.segments is not None and make_inputs(c).empty.any(), id="rows-with-no-key"),
    ],
)
def test_hard_corners_are_reachable(condition):
    find(cases(FLASH), condition, settings=settings(max_examples=2000, database=None))


@settings(max_examples=200, database=None)
@given(st.integers(1, 600), st.integers(1, 5), st.data())
def test_segment_runs_cover_the_length(length, max_segments, data):
    runs = data.draw(segment_runs(length=length, max_segments=max_segments))
    assert sum(runs) == length and all(r > 0 for r in runs) and len(runs) <= max_segments


def test_tile_edges_are_where_tiles_meet_one_either_side_and_inside_a_tile():
    assert tile_edges(length=256, tiles=(128,)) == (64, 127, 128, 129, 192)
    assert tile_edges(length=128, tiles=(64, 128)) == (32, 63, 64, 65, 96)
    assert tile_edges(length=1) == ()


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda runs: runs[0] == 128, id="at-the-tile-edge"),
        pytest.param(lambda runs: runs[0] == 127, id="one-before"),
        pytest.param(lambda runs: runs[0] == 129, id="one-past"),
        pytest.param(lambda runs: runs[0] == 32, id="inside-an-inner-step"),
    ],
)
def test_segments_change_where_the_tiles_meet(condition):
    # 64-wide inner key steps in 128-wide tiles: edges at 64, 128, 192 and inside a step at 32.
    find(segment_runs(length=256, tiles=(64, 128)), condition, settings=settings(max_examples=300, database=None))


@settings(max_examples=100, database=None)
@given(segments(batch=2, q_len=128, kv_len=256))
def test_segments_match_the_sequences(segs):
    assert segs.lengths("q") == (128, 128) and segs.lengths("kv") == (256, 256)
    vis = dense_mask(Mask(segments=segs), batch=2, heads=1, q_len=128, kv_len=256)
    # A query row is empty exactly when its id appears in none of its row's keys.
    q_ids, kv_ids = segs.ids("q"), segs.ids("kv")
    expected = ~np.stack([np.isin(q_ids[b], kv_ids[b]) for b in range(2)])
    assert (empty_rows(vis)[:, 0] == expected).all()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda: cases(FLASH, dtypes=("float64",)), "dtypes \\['float64'\\] are not supported", id="dtype"),
        pytest.param(lambda: cases(FLASH, regimes=("huge",)), "regimes \\['huge'\\] are unknown", id="regime"),
        pytest.param(lambda: segment_runs(length=0), "length=0", id="length"),
    ],
)
def test_bad_strategy_arguments_say_how_to_fix_them(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda n: n == 0, id="zero"),
        pytest.param(lambda n: n == 1, id="one"),
        pytest.param(lambda n: n == 96, id="page-aligned"),
        pytest.param(lambda n: n == 33, id="one-past-a-page"),
        pytest.param(lambda n: n == 128, id="maximum"),
    ],
)
def test_valid_lengths_reach_the_paging_corners(condition):
    find(valid_lengths(length=128), condition, settings=settings(max_examples=500, database=None))


@settings(max_examples=100, database=None)
@given(st.data())
def test_lengths_q_le_kv_keeps_queries_within_keys(data):
    components = frozenset({"q_lengths", "kv_lengths"})
    got = data.draw(
        lengths(components=components, restrictions=frozenset({LENGTHS_Q_LE_KV}), batch=3, q_len=16, kv_len=64)
    )
    # Queries alone are clamped to kv_len; with key lengths, row by row.
    assert all(q <= k for q, k in zip(got.q, got.kv or (64,) * 3, strict=True))


# Windows on Lq=16, Lk=48: offsets run from -16 (every row sees nothing) to 48 (every row sees
# everything); 0 is top-left and 32 bottom-right alignment; a side is None (unbounded) or 0..48.
WQ, WK = 16, 48


@settings(max_examples=200, database=None)
@given(windows(q_len=WQ, kv_len=WK, causal=True))
def test_causal_windows_are_causal_with_an_offset_in_range(w):
    assert w.left is None and w.right == 0 and w.is_causal
    assert -WQ <= w.offset <= WK


@settings(max_examples=200, database=None)
@given(windows(q_len=WQ, kv_len=WK))
def test_windows_are_bands_with_sides_and_offset_in_range(w):
    assert (w.left, w.right) not in ((None, None), (None, 0))  # no mask, or the causal kind
    assert all(side is None or 0 <= side <= WK for side in (w.left, w.right))
    assert -WQ <= w.offset <= WK


@pytest.mark.parametrize("offset", [-WQ, 0, WK - WQ, WK], ids=["nothing", "top-left", "bottom-right", "everything"])
def test_every_causal_offset_corner_is_reachable(offset):
    find(windows(q_len=WQ, kv_len=WK, causal=True), lambda w: w.offset == offset, settings=settings(database=None))


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda w: w.right == 0 and w.left is not None, id="right-0"),
        pytest.param(lambda w: w.left == 0, id="left-0"),
    ],
)
def test_a_window_side_of_zero_is_reachable(condition):
    find(windows(q_len=WQ, kv_len=WK), condition, settings=settings(database=None))


XLA, SPLASH, TORCH = resolve("jax_xla"), resolve("pallas_splash"), resolve("torch_sdpa")


@pytest.mark.no_mutation
@pytest.mark.parametrize(
    ("impl", "condition"),
    [
        pytest.param(SPLASH, lambda c: c.soft_cap is not None, id="splash-soft_cap"),
        pytest.param(SPLASH, lambda c: c.sinks, id="splash-sinks"),
        pytest.param(SPLASH, lambda c: c.residuals, id="splash-residuals"),
        pytest.param(TORCH, lambda c: c.dtype == "float64", id="torch-float64"),
        pytest.param(XLA, lambda c: c.mask.window is not None, id="xla-window"),
        pytest.param(XLA, lambda c: "mask_arg" in c.block_dict and c.mask.lengths is not None, id="xla-mask-arg"),
        pytest.param(XLA, lambda c: c.residuals, id="xla-residuals"),
    ],
)
def test_new_case_features_are_reachable_where_declared(impl, condition):
    case = find(cases(impl), condition, settings=settings(max_examples=500, database=None))
    assert impl.violations(case) == []


@pytest.mark.no_mutation
@settings(max_examples=200, deadline=None, database=None)
@given(cases(FLASH) | cases(TORCH) | cases(XLA))
def test_soft_cap_and_sinks_are_never_drawn_where_undeclared(case):
    assert case.soft_cap is None and not case.sinks


@pytest.mark.no_mutation
@settings(max_examples=200, deadline=None, database=None)
@given(cases(XLA))
def test_every_drawn_xla_case_is_inside_its_contract(case):
    # Windows only at offset 0 with both sides bounded: what local_window_size can say.
    assert XLA.violations(case) == []
