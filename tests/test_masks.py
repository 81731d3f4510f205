"""Mask descriptions: dense building of each component on hand-made examples, JSON, validation."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.case import Case, CaseError
from harness.core.inputs import make_inputs
from harness.core.masks import BlockSparse, Chunk, Lengths, Mask, Segments, Window, dense_mask, empty_rows


def grid(rows: list[str]) -> np.ndarray:
    return np.array([[c == "1" for c in r] for r in rows])


def dense2d(mask: Mask, q_len: int, kv_len: int) -> np.ndarray:
    return dense_mask(mask, batch=1, heads=1, q_len=q_len, kv_len=kv_len)[0, 0]


@pytest.mark.parametrize(
    ("mask", "q_len", "kv_len", "want"),
    [
        pytest.param(Mask(causal="top_left"), 3, 4, ["1000", "1100", "1110"], id="causal-top-left"),
        pytest.param(Mask(causal="bottom_right"), 3, 4, ["1100", "1110", "1111"], id="causal-bottom-right"),
        # Causal with an offset: query i sees keys j <= i + offset.
        pytest.param(Mask(window=Window(None, 0, 1)), 3, 4, ["1100", "1110", "1111"], id="causal-offset-1"),
        pytest.param(Mask(window=Window(None, 0, -1)), 3, 3, ["000", "100", "110"], id="causal-offset-neg"),
        # i + offset - left <= j <= i + offset + right
        pytest.param(Mask(window=Window(1, 0)), 4, 4, ["1000", "1100", "0110", "0011"], id="window-left"),
        pytest.param(Mask(window=Window(0, 1)), 3, 4, ["1100", "0110", "0011"], id="window-right"),
        pytest.param(Mask(window=Window(0, 0, 2)), 2, 4, ["0010", "0001"], id="window-offset"),
        pytest.param(Mask(window=Window(1, None, -1)), 4, 3, ["111", "111", "111", "011"], id="window-open-right"),
        pytest.param(Mask(chunk=Chunk(2)), 4, 4, ["1000", "1100", "0010", "0011"], id="chunk"),
        pytest.param(Mask(chunk=Chunk(3)), 4, 4, ["1000", "1100", "1110", "0001"], id="chunk-3"),
        pytest.param(
            Mask(block_sparse=BlockSparse(2, 3, ("10", "01"))), 3, 5, ["11100", "11100", "00011"], id="block-sparse"
        ),
        pytest.param(
            Mask(causal="top_left", chunk=Chunk(2), window=Window(0, 0)), 3, 3, ["100", "010", "001"], id="conjunction"
        ),
    ],
)
def test_dense_mask_of_each_component(mask: Mask, q_len: int, kv_len: int, want: list[str]) -> None:
    np.testing.assert_array_equal(dense2d(mask, q_len, kv_len), grid(want))


def test_per_head_masks_apply_to_query_heads_and_conjoin_with_shared_parts() -> None:
    mask = Mask(
        causal="top_left", heads=(Mask(), Mask(window=Window(0, 0)), Mask(chunk=Chunk(1)), Mask(causal="top_left"))
    )
    vis = dense_mask(mask, batch=2, heads=4, q_len=3, kv_len=3)
    assert vis.shape == (2, 4, 3, 3)
    np.testing.assert_array_equal(vis[1, 0], grid(["100", "110", "111"]))
    np.testing.assert_array_equal(vis[0, 1], np.eye(3, dtype=bool))
    np.testing.assert_array_equal(vis[0, 2], np.eye(3, dtype=bool))
    np.testing.assert_array_equal(vis[0, 3], vis[0, 0])


def test_per_head_masks_under_gqa_are_per_query_head() -> None:
    # 4 query heads share 2 kv heads; each query head still gets its own mask.
    heads = tuple(Mask(window=Window(h, 0)) for h in range(4))
    case = Case(batch=1, q_heads=4, kv_heads=2, q_len=4, kv_len=4, head_dim=8, mask=Mask(heads=heads))
    inputs = make_inputs(case)
    assert inputs.visible.shape == (1, 4, 4, 4)
    assert [int(inputs.visible[0, h].sum()) for h in range(4)] == [4, 7, 9, 10]
    with pytest.raises(CaseError, match="one per query head"):
        case.replace(q_heads=2, kv_heads=2)


def test_segments_and_empty_rows_with_new_components() -> None:
    segs = Segments(q=(((0, 2), (5, 1)),), kv=(((0, 3),),))
    vis = dense_mask(Mask(segments=segs, window=Window(0, 0)), batch=1, heads=1, q_len=3, kv_len=3)
    np.testing.assert_array_equal(vis[0, 0], grid(["100", "010", "000"]))
    np.testing.assert_array_equal(empty_rows(vis)[0, 0], [False, False, True])


def test_components_name_each_part_including_per_head_ones() -> None:
    mask = Mask(
        causal="bottom_right",
        segments=Segments(q=(((0, 4),),), kv=(((0, 4),),)),
        heads=(
            Mask(window=Window(None, 0, 2)),
            Mask(window=Window(1, 1)),
            Mask(chunk=Chunk(2)),
            Mask(block_sparse=BlockSparse(2, 2, ("10", "11"))),
        ),
    )
    assert mask.components == {
        "causal_bottom_right",
        "segments",
        "per_head",
        "causal_offset",
        "window",
        "chunk",
        "block_sparse",
    }
    assert Mask().components == frozenset()


@pytest.mark.parametrize(
    "mask",
    [
        Mask(),
        Mask(causal="top_left"),
        Mask(window=Window(None, 0, -3)),
        Mask(window=Window(2, None, 5)),
        Mask(chunk=Chunk(7)),
        Mask(block_sparse=BlockSparse(2, 3, ("101", "011"))),
        Mask(causal="top_left", heads=(Mask(window=Window(1, 1)), Mask(block_sparse=BlockSparse(4, 4, ("1",))))),
        Mask(segments=Segments(q=(((0, 4),),), kv=(((1, 2), (0, 2)),)), chunk=Chunk(2)),
    ],
    ids=repr,
)
def test_json_round_trip(mask: Mask) -> None:
    assert Mask.from_json(mask.to_json()) == mask
    case = Case(batch=1, q_heads=2, kv_heads=1, q_len=4, kv_len=4, head_dim=8, mask=mask) if mask.heads else None
    if case is not None:
        assert Case.from_json(case.to_json()) == case


def test_json_of_old_fields_is_unchanged_so_case_ids_stay() -> None:
    assert Mask(causal="top_left").to_json() == {"causal": "top_left", "segments": None}


def test_repr_is_readable() -> None:
    mask = Mask(
        window=Window(None, 0, -2), block_sparse=BlockSparse(64, 128, ("10", "01")), heads=(Mask(chunk=Chunk(3)),)
    )
    assert repr(mask) == "Mask(causal(offset=-2), block_sparse(64x128: 10/01), heads=[Mask(chunk(3))])"
    assert repr(Window(1, 2, 3)) == "window(left=1, right=2, offset=3)"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(lambda: Window(None, None), "no mask", id="window-unbounded"),
        pytest.param(lambda: Window(-1, 0), "non-negative", id="window-negative"),
        pytest.param(lambda: Chunk(0), "positive", id="chunk-zero"),
        pytest.param(lambda: BlockSparse(0, 1, ("1",)), "positive", id="block-zero"),
        pytest.param(lambda: BlockSparse(1, 1, ("10", "1")), "equal-length", id="ragged-pattern"),
        pytest.param(lambda: BlockSparse(1, 1, ("1x",)), "'0' and '1'", id="bad-char"),
        pytest.param(lambda: Mask(heads=()), "empty", id="no-heads"),
        pytest.param(lambda: Mask(heads=(Mask(heads=(Mask(),)),)), "without segments or heads", id="nested-heads"),
        pytest.param(lambda: Mask.from_json({"causal": None, "windo": {}}), "unknown mask fields", id="unknown-field"),
        pytest.param(lambda: Mask.from_json({"chunk": {"size": 2, "x": 1}}), "unknown chunk fields", id="unknown-sub"),
    ],
)
def test_bad_descriptions_name_the_field(build, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_block_sparse_pattern_must_cover_the_plane() -> None:
    with pytest.raises(CaseError, match="need 2x1"):
        Case(
            batch=1,
            q_heads=1,
            kv_heads=1,
            q_len=4,
            kv_len=3,
            head_dim=8,
            mask=Mask(block_sparse=BlockSparse(2, 4, ("1", "1", "0"))),
        )


# Per-row valid lengths (harness.core.masks.Lengths): a padded or paged batch of sequences.


def test_kv_lengths_and_starts_hide_keys_per_row() -> None:
    mask = Mask(lengths=Lengths(kv=(2, 4, 0), kv_starts=(0, 1, 0)))
    vis = dense_mask(mask, batch=3, heads=1, q_len=1, kv_len=4)[:, 0, 0]
    np.testing.assert_array_equal(vis, grid(["1100", "0111", "0000"]))


def test_padded_query_rows_see_no_key() -> None:
    mask = Mask(lengths=Lengths(q=(1, 3)))
    vis = dense_mask(mask, batch=2, heads=2, q_len=3, kv_len=2)
    np.testing.assert_array_equal(empty_rows(vis)[:, 0], [[False, True, True], [False, False, False]])


def test_bottom_right_causal_aligns_at_each_rows_valid_lengths() -> None:
    # Row 0: 2 queries at the end of 3 keys; row 1: 1 query (decode) at the end of 4 keys.
    mask = Mask(causal="bottom_right", lengths=Lengths(q=(2, 1), kv=(3, 4)))
    vis = dense_mask(mask, batch=2, heads=1, q_len=2, kv_len=5)[:, 0]
    np.testing.assert_array_equal(vis[0], grid(["11000", "11100"]))
    np.testing.assert_array_equal(vis[1], grid(["11110", "00000"]))


def test_top_left_causal_is_unmoved_by_lengths() -> None:
    mask = Mask(causal="top_left", lengths=Lengths(kv=(2,)))
    np.testing.assert_array_equal(dense2d(mask, 3, 3), grid(["100", "110", "110"]))


def test_lengths_components_json_and_validation() -> None:
    mask = Mask(lengths=Lengths(q=(1, 0), kv_starts=(0, 2)))
    assert mask.components == {"q_lengths", "kv_starts"}
    assert Mask.from_json(mask.to_json()) == mask
    assert Mask().to_json() == {"causal": None, "segments": None}  # old JSON (and case ids) unchanged
    with pytest.raises(CaseError, match="exceed the padded length 4"):
        Case(batch=1, q_heads=1, kv_heads=1, q_len=1, kv_len=4, head_dim=8, mask=Mask(lengths=Lengths(kv=(5,))))
    with pytest.raises(CaseError, match="one per batch row"):
        Case(batch=2, q_heads=1, kv_heads=1, q_len=1, kv_len=4, head_dim=8, mask=Mask(lengths=Lengths(kv=(1,))))
    with pytest.raises(ValueError, match="non-negative"):
        Lengths(kv=(-1,))
    with pytest.raises(ValueError, match="no mask"):
        Lengths()
