"""The paged KV cache built from a case: page tables that are never the identity, and exact scatters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import paging, strategies
from harness.core.case import Case
from harness.core.inputs import int8_grid, make_inputs
from harness.core.masks import Lengths, Mask, dense_mask


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


@settings(max_examples=60, database=None, deadline=None)
@given(st.data(), st.sampled_from((16, 64)), st.sampled_from((1, 8, 16)), st.integers(1, 3))
def test_the_sliding_window_mask_is_the_last_w_keys_up_to_each_querys_position(data, kv_len, q_len, batch):
    # The strategies' SLIDING_WINDOW form through the dense mask every oracle reads, against
    # paging.visible_rows, written from ragged_paged_attention's definition (position - w >= key: hidden).
    kv = tuple(data.draw(st.lists(st.integers(0, kv_len), min_size=batch, max_size=batch)))
    size = data.draw(st.integers(1, kv_len))
    kw = strategies.sliding_window(size, Lengths(q=(q_len,) * batch, kv=kv), q_len, kv_len)
    mask = Mask(causal="bottom_right", **kw)
    dense = dense_mask(mask, batch=batch, heads=1, q_len=q_len, kv_len=kv_len)[:, 0]
    want = paging.visible_rows(q_lens=mask.lengths.q, kv_lens=kv, q_len=q_len, kv_len=kv_len, window=size)
    np.testing.assert_array_equal(dense, want)


def _ragged_pools(seed: int, *, kv_heads: int, page_size: int, pool_pages: int, dim: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((kv_heads, pool_pages, page_size, dim)).astype(np.float32)


@pytest.mark.parametrize(
    ("window", "cap", "k_scale", "v_scale"),
    [(None, None, None, None), (5, None, None, None), (None, 2.0, None, None), (3, 2.0, 4.0, 0.5)],
)
def test_the_gathered_truth_agrees_with_upstreams_ragged_reference(window, cap, k_scale, v_scale) -> None:
    # Two sequences (a decode step and a 3-token prefill chunk) over a non-identity table;
    # upstream's float32 reference and paging.gathered_truth computed independently.
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as upstream

    case = _case((9, 16), kv_len=16, seed=3)
    table = paging.page_table(case, page_size=8, spare_pages=2)
    k_pool, v_pool = (_ragged_pools(s, kv_heads=1, page_size=8, pool_pages=table.pool_pages, dim=8) for s in (1, 2))
    q_lens, kv_lens = (1, 3), (9, 16)
    q = np.random.default_rng(4).standard_normal((2, 2, 3, 8)).astype(np.float32)
    packed = np.concatenate([q[b, :, :n].swapaxes(0, 1) for b, n in enumerate(q_lens)])
    kv_pages = np.stack([k_pool, v_pool], axis=1).reshape(2, *k_pool.shape[1:]).transpose(1, 2, 0, 3)
    got = upstream.ref_ragged_paged_attention(
        packed,
        kv_pages,
        np.asarray(kv_lens, np.int32),
        table.indices,
        np.asarray([0, 1, 4], np.int32),
        np.asarray([2], np.int32),
        sm_scale=0.5,
        sliding_window=window,
        soft_cap=cap,
        k_scale=k_scale,
        v_scale=v_scale,
    )
    k64, v64 = (p.astype(np.float64) * (s or 1.0) for p, s in ((k_pool, k_scale), (v_pool, v_scale)))
    truth = paging.gathered_truth(q, k64, v64, table, q_lens=q_lens, kv_lens=kv_lens, scale=0.5, cap=cap, window=window)
    want = np.concatenate([truth[b, :, :n].swapaxes(0, 1) for b, n in enumerate(q_lens)])
    np.testing.assert_allclose(np.asarray(got, np.float64), want, atol=2e-6)


def test_the_truth_gathered_from_the_pages_is_the_dense_truth() -> None:
    # What the paged adapters feed the kernel, read back through the table, gives the oracles' answer.
    from harness.core import reference

    case = _case((0, 17, 64), dtype="bfloat16", kv_format="int8", seed=5)
    inputs = make_inputs(case)
    truth, ruler = paging.case_reference(case, inputs, page_size=16, spare_pages=2)
    want = reference.truth(case, inputs, grads=False).out
    np.testing.assert_allclose(truth, want, rtol=0, atol=1e-12)
    assert 0 < np.abs(ruler - truth).max() < 0.05  # the bfloat16 ruler: rounded, not a copy
