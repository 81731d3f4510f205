"""kernels/_pallas.py: what the Pallas adapters share (their own tests run each adapter through it)."""

from __future__ import annotations

import pytest

from kernels._pallas import block_names, divisors, lane_tiles


def test_lane_tiles_and_divisors_smallest_first() -> None:
    assert lane_tiles(384) == [128, 384] and lane_tiles(100) == []
    assert divisors(12) == [1, 2, 3, 4, 6, 12]


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        pytest.param({"a": 1, "b": 2}, None, id="exact"),
        pytest.param({"a": 1, "b": 2, "c": 1}, None, id="optional"),
        pytest.param({"a": 1}, "missing ['b'], unknown []", id="missing"),
        pytest.param({"a": 1, "b": 2, "z": 3}, "missing [], unknown ['z']", id="unknown"),
    ],
)
def test_block_names_say_what_is_missing_and_what_is_unknown(blocks: dict, message: str | None) -> None:
    got = block_names(blocks, need=("a", "b"), may=("c",), note="c is a flag")
    if message is None:
        assert got is None
    else:
        assert got == f"blocks must name ['a', 'b'] and may add ['c'] (c is a flag); {message}"
