"""The paged KV cache built from a case: page tables that are never the identity, and exact scatters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import paging
from harness.case import Case
from harness.inputs import int8_grid, make_inputs
from harness.masks import Lengths, Mask


def _case(lengths: tuple[int, ...], kv_len: int = 64, seed: int = 0, **kw) -> Case:
    mask = Mask(lengths=Lengths(kv=lengths))
    return Case(
        batch=len(lengths), q_heads=2, kv_heads=1, q_len=1, kv_len=kv_len, head_dim=8, mask=mask, seed=seed, **kw
    )


@settings(max_examples=60, database=None, deadline=None)
@given(
    st.lists(st.integers(0, 64), min_size=1, max_size=3),
    st.sampled_from((8, 16, 32)),
    st.integers(0, 3),
    st.integers(0, 2**16),
)
def test_every_used_page_has_its_own_place_and_the_table_is_not_the_identity(lengths, page_size, spare, seed):
    case = _case(tuple(lengths), seed=seed)
    table = paging.page_table(case, page_size=page_size, spare_pages=spare)
    used = [table.indices[b, :n] for b, n in enumerate(table.used)]
    flat = np.concatenate(used)
    assert table.used == tuple(-(-n // page_size) for n in lengths)
    assert len(set(flat.tolist())) == flat.size  # no two used pages share a place
    assert ((table.indices >= 0) & (table.indices < table.pool_pages)).all()
    if table.pool_pages > 1 and flat.size:
        assert not (flat == np.arange(flat.size)).all()


def test_scatter_puts_each_valid_key_on_its_page() -> None:
    case = _case((0, 17, 64))
    inputs = make_inputs(case)
    table = paging.page_table(case, page_size=16, spare_pages=2)
    pool = paging.scatter(inputs.k, table, seed=1)
    for b, n in enumerate((0, 17, 64)):
        gathered = pool[:, table.indices[b]].reshape(case.kv_heads, -1, case.head_dim)[:, :n]
        np.testing.assert_array_equal(gathered, inputs.k[b, :, :n])
    # A slot no valid key fills holds noise, not a copy of the keys past the length.
    assert np.isfinite(pool).all()


def test_int8_inputs_are_exactly_on_the_grid_the_adapter_recovers() -> None:
    case = _case((64,), dtype="bfloat16", kv_format="int8")
    inputs = make_inputs(case)
    codes, step = int8_grid(inputs.k)
    assert np.abs(codes).max() <= 127
    np.testing.assert_array_equal(codes * step, inputs.k.astype(np.float64))
    assert set(np.log2(step).ravel()) <= set(np.arange(-20, 20))


def test_bad_layouts_name_the_value() -> None:
    with pytest.raises(ValueError, match="page_size=0"):
        paging.page_table(_case((3,)), page_size=0, spare_pages=0)
    with pytest.raises(ValueError, match="cannot hold kv_len=64"):
        paging.page_table(_case((3,)), page_size=8, spare_pages=0, pages_per_sequence=2)
