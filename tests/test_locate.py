"""Where an error sits: harness.core.locate on known arrays, through the runner, and on every planted bug.

Each planted bug runs on ONE fixed small case (no search); the two cheapest (forward only,
~2 CPU s each) are in the default suite, the rest are `slow`.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness.core import contract
from harness.core.case import Case
from harness.core.locate import MAX_CELLS, Located, Strip, locate, locate_quantity, tiling, where
from harness.core.masks import Mask
from harness.running.failures import load_failure, write_failure
from harness.running.runner import Check, run_case
from kernels.pallas_flash import uniform_blocks
from tests import _fakes
from tests.planted import PLANTED, spec

# --- pure: arrays in, located summaries out ---


def _arrays(shape=(2, 2, 8, 4), seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal(shape)
    return truth.copy(), truth


def test_each_row_holds_its_largest_error_over_the_bound():
    got, truth = _arrays()
    got[1, 0, 5, 2] += 0.3  # batch 1, head 0, row 5: 3x a bound of 0.1
    got[1, 1, 2, 0] += 0.05  # within the bound
    s = locate_quantity("out", got, truth, 0.1, batch=1)
    assert s.axis == "query" and s.length == 8 and s.stride == 1 and s.heads == 2
    assert s.values[0][5] == pytest.approx(3.0) and s.values[1][2] == pytest.approx(0.5)
    assert sum(v > 0 for row in s.values for v in row) == 2
    assert s.past() == [(0, 5)]
    assert s.worst == pytest.approx(3.0)


def test_key_quantities_are_located_per_key_row():
    got, truth = _arrays()
    got[0, 1, 7, :] += 1.0
    s = locate_quantity("dv", got, truth, 0.5, batch=0)
    assert s.axis == "key" and s.past() == [(1, 7)]
    assert "k rows (7), head 1" in where(s)


def test_non_finite_values_are_counted_apart_and_rows_not_judged_are_none():
    got, truth = _arrays()
    got[0, 0, 3, :2] = np.nan
    got[0, 1, 6, 0] = np.inf
    judged = np.ones((2, 2, 8), bool)
    judged[0, 0, 0] = False
    s = locate_quantity("out", got, truth, 0.1, batch=0, judged=judged)
    assert s.nonfinite == ((0, 3, 2), (1, 6, 1))
    assert s.values[0][3] == 0.0  # the finite part of that row is exact
    assert s.values[0][0] is None
    assert math.isinf(s.worst)
    assert where(s).endswith("3 non-finite values, worst finite error 0x")


def test_where_names_the_tiles_holding_non_finite_values():
    got, truth = _arrays((1, 1, 8, 2))
    got[0, 0, 6, 0] = np.nan  # the only bad row, in tile 1 of 4-row tiles
    s = locate_quantity("out", got, truth, 1.0, batch=0, tiles=tiling({"block_q": 4}))
    assert where(s) == (
        "out: past the bound in 1 of 8 q rows (6), head 0; in query tile 1 of 0-1 (4 rows each); "
        "1 non-finite values, worst finite error 0x"
    )


def test_a_long_axis_is_pooled_to_at_most_max_cells_keeping_every_maximum():
    got, truth = _arrays((1, 1, 4 * MAX_CELLS + 3, 2))
    got[0, 0, 4 * MAX_CELLS + 2, 1] += 5.0  # the very last row, in the short last group
    got[0, 0, 9, 0] = np.nan
    s = locate_quantity("dq", got, truth, 1.0, batch=0)
    assert s.stride == 5 and len(s.values[0]) == -(-(4 * MAX_CELLS + 3) // 5) <= MAX_CELLS
    assert s.values[0][-1] == pytest.approx(5.0)
    assert s.nonfinite == ((0, 1, 1),)


def test_tiles_come_from_the_pass_of_the_quantity():
    flash = uniform_blocks() | {"block_q": 256, "block_k_major": 512, "block_k_dkv": 64}
    assert tiling(flash, "fwd").q == 256 and tiling(flash, "fwd").k_major == 512
    assert tiling(flash, "dkv").k == 64 and tiling(flash, "dq").q == 128
    splash = {"block_q": 128, "block_kv": 256, "block_kv_compute": 128}
    assert (tiling(splash, "fwd").k, tiling(splash, "fwd").k_major) == (128, 256)
    assert tiling({}, "fwd").q is None


def test_dbias_is_located_per_query_tile_and_key_tile():
    got, truth = _arrays((1, 1, 8, 8))
    got[0, 0, 5, 1] += 2.0
    s = locate_quantity("dbias", got, truth, 1.0, batch=0, tiles=tiling({"block_q": 4, "block_k": 4}))
    assert s.grid == (((0.0, 0.0), (2.0, 0.0)),)


def test_locate_keeps_the_worst_batch_row_and_skips_unusable_quantities():
    got, truth = _arrays()
    got[1, 0, 0, 0] += 1.0
    both = {"out": got, "dq": got, "dk": None}
    loc = locate(both, {"out": truth, "dq": truth, "dk": truth}, {"out": 0.1, "dq": math.nan}, blocks={})
    assert loc.batch == 1 and loc.per_batch == (0.0, 10.0)
    assert [s.quantity for s in loc.strips] == ["out"]
    assert locate({"out": got}, {"out": truth}, {"out": 0.0}, blocks={}) is None


def test_located_round_trips_through_json_and_an_unknown_schema_reads_as_none():
    got, truth = _arrays()
    got[0, 1, 4, 0] = np.nan
    loc = locate({"out": got, "dk": got}, {"out": truth, "dk": truth}, {"out": 0.1, "dk": 0.2}, blocks={"block_q": 4})
    text = json.dumps(loc.to_json())
    assert Located.from_json(json.loads(text)) == loc
    assert Located.from_json({**loc.to_json(), "schema": 99}) is None
    assert Located.from_json({"schema": 1, "batch": 0}) is None
    assert Located.from_json(None) is None


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param({"axis": "diagonal"}, id="unknown axis"),
        pytest.param({"stride": 0}, id="zero stride"),
        pytest.param({"values": [[1.0, 2.0]]}, id="too few values"),
        pytest.param({"values": [["x"] * 8, [0.0] * 8]}, id="a value that is not a number"),
        pytest.param({"nonfinite": [[5, 0, 1]]}, id="non-finite entry out of range"),
        pytest.param({"tile": "128"}, id="tile not a number"),
    ],
)
def test_a_damaged_strip_reads_as_none_rather_than_drawing_nonsense(damage):
    got, truth = _arrays()
    doc = locate({"out": got}, {"out": truth}, {"out": 0.1}, blocks={}).to_json()
    assert Located.from_json(doc) is not None
    doc["strips"][0].update(damage)
    assert Located.from_json(doc) is None


# --- through the runner: located on failure only, from the arrays the comparison judged ---


def test_the_runner_locates_a_failure_and_nothing_on_a_pass():
    result = run_case(_fakes.small_case(), [_fakes.BROKEN, _fakes.CORRECT, _fakes.NAN], grads=False)
    broken, correct, nan = result.subjects
    assert correct.passed and correct.located is None
    assert not broken.passed and broken.located is not None
    out = broken.located.strip("out")
    worst = next(c for c in broken.comparisons if c.quantity == "out")
    # The worst located row is the comparison's own error over its own bound.
    assert out.worst == pytest.approx(worst.max_abs / worst.bound, rel=1e-2)
    # The NaN the fake plants at the first element: head 0, query row 0.
    assert nan.located.strip("out").nonfinite == ((0, 0, 1),)


# --- every planted bug, on one fixed small case: the error sits where the bug is ---

CAUSAL = Mask(causal="top_left")


def _planted_case(name: str) -> Case:
    blocks = uniform_blocks()
    if name == "fwd_v_offset_minor_blocks":
        # Two minor key tiles in one major tile: the bug reads the first v sub-tile for both.
        blocks |= {"block_k_major": 256, "block_k": 128}
    return Case(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=256, head_dim=64, mask=CAUSAL, blocks=blocks)


def _located(name: str, *, grads: bool):
    kernel = contract.resolve(spec(name))
    result = run_case(_planted_case(name), [kernel], grads=grads)
    (s,) = result.subjects
    assert not s.passed, f"{name} passed its fixed case"
    return result, s.located


def _rows(strip: Strip) -> list[float]:
    return [v for v in strip.values[0]]


def test_causal_off_by_one_is_past_the_bound_in_every_row_worst_where_rows_see_fewest_keys():
    _, loc = _located("fwd_causal_off_by_one", grads=False)
    out = loc.strip("out")
    # Every query loses the key on its own diagonal, so every row is wrong ...
    assert all(v > 1 for v in _rows(out))
    # ... and by less the more keys a row averages: the first query tile (rows 0-127, up to
    # 128 keys each) is worse than the second (rows 128-255, 129-256 keys).
    assert out.tiles[0][0] > 5 * out.tiles[0][1] > 5


def test_minor_block_bug_sits_past_the_first_key_sub_tile_only(tmp_path):
    result, loc = _located("fwd_v_offset_minor_blocks", grads=False)
    out = loc.strip("out")
    # Rows 0-127 see only keys 0-127, the first minor tile, which the bug reads correctly.
    assert max(_rows(out)[:128]) < 1
    assert min(_rows(out)[128:]) > 1
    assert where(out).startswith("out: past the bound in 128 of 256 q rows (128-255)")
    # The failure file keeps it, small.
    kernel = contract.resolve(spec("fwd_v_offset_minor_blocks"))
    path = write_failure(tmp_path, result, Check(kernel=kernel, grads=False))
    assert path.stat().st_size < 100_000
    doc = load_failure(path).doc
    assert Located.from_json(doc["results"][kernel.name]["located"]) == loc


@pytest.mark.slow
def test_backward_only_bug_sits_in_dk_and_dv_not_in_out_or_dq(tmp_path):
    result, loc = _located("bwd_dkv_causal", grads=True)
    assert loc.strip("out").worst < 1 and loc.strip("dq").worst < 1
    for q in ("dk", "dv"):
        strip = loc.strip(q)
        assert all(v > 1 for v in strip.tiles[0]), f"{q} should be past the bound in both key tiles"
    kernel = contract.resolve(spec("bwd_dkv_causal"))
    assert write_failure(tmp_path, result, Check(kernel=kernel, grads=True)).stat().st_size < 100_000


@pytest.mark.slow
def test_rescaling_bug_sits_in_rows_that_walk_a_second_key_tile():
    _, loc = _located("fwd_rescale_alpha", grads=False)
    out = loc.strip("out")
    # Rows 0-127 see one key tile: no rescaling happens, nothing to get wrong.
    assert max(_rows(out)[:128]) < 1 and max(_rows(out)[128:]) > 1


@pytest.mark.slow
def test_precision_bug_is_spread_over_every_tile_and_finite():
    _, loc = _located("fwd_qk_bfloat16", grads=False)
    out = loc.strip("out")
    assert not out.nonfinite
    assert all(t > 1 for t in out.tiles[0])
    assert sum(v > 1 for v in _rows(out)) > 0.9 * out.length


def test_every_planted_bug_has_a_located_check():
    names = {n.removeprefix("test_") for n in globals()}
    checked = {
        "fwd_causal_off_by_one": "causal_off_by_one_is_past_the_bound_in_every_row_worst_where_rows_see_fewest_keys",
        "fwd_v_offset_minor_blocks": "minor_block_bug_sits_past_the_first_key_sub_tile_only",
        "bwd_dkv_causal": "backward_only_bug_sits_in_dk_and_dv_not_in_out_or_dq",
        "fwd_rescale_alpha": "rescaling_bug_sits_in_rows_that_walk_a_second_key_tile",
        "fwd_qk_bfloat16": "precision_bug_is_spread_over_every_tile_and_finite",
    }
    assert set(checked) == set(PLANTED)
    assert set(checked.values()) <= names
