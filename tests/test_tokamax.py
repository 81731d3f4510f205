"""tokamax adapters: registered where tokamax imports, and fixed runs with lengths, causal, bias and GQA."""

from __future__ import annotations

import pytest

pytest.importorskip("tokamax")

import numpy as np  # noqa: E402
import tokamax  # noqa: E402
from hypothesis import given, settings  # noqa: E402

from harness.core import contract, paging
from harness.core.case import Case  # noqa: E402
from harness.core.compare import compare, tolerance  # noqa: E402
from harness.core.contract import QUANTITIES  # noqa: E402
from harness.core.inputs import make_inputs  # noqa: E402
from harness.core.masks import Chunk, Lengths, Mask, Window  # noqa: E402
from harness.core.rows import batch_row  # noqa: E402
from harness.core.strategies import cases  # noqa: E402
from harness.running.runner import run_case  # noqa: E402
from harness.runtime import compat  # noqa: E402
from kernels import _tokamax  # noqa: E402


def test_capabilities_come_from_the_signature_and_the_hardware():
    assert {"xla", "xla_chunked"} <= set(_tokamax.implementations())
    names = contract.names("kernel")
    assert {"tokamax_xla", "tokamax_xla_chunked"} <= set(names)
    # triton and cudnn need a GPU: not registered on a CPU host (mosaic runs under the Pallas
    # interpreters: tests/test_tokamax_mosaic.py).
    for impl in ("triton", "cudnn"):
        assert (f"tokamax_{impl}" in names) == _tokamax.available(impl)
    # XLA:CPU refuses tokamax's float16 dot preset: float16 is drawn only off a CPU backend.
    assert ("float16" in contract.resolve("tokamax_xla").capabilities.dtypes) == (compat.jax_platform() != "cpu")


@pytest.mark.parametrize("name", ["tokamax_xla", "tokamax_xla_chunked"])
def test_a_drop_in_is_wrapped_as_the_implementation_it_names(name):
    # `--kernel tokamax_xla=MODULE:ATTR`: the adapter class lives in kernels/_tokamax.py, shared by every
    # implementation, so the drop-in must come from the registered kernel, not from its class's module.
    impl = contract.resolve(f"{name}=tokamax:dot_product_attention")
    assert isinstance(impl, _tokamax.TokamaxAttention)
    assert impl.implementation == name.removeprefix("tokamax_") and impl.name == f"{name}=tokamax:dot_product_attention"
    assert impl.description.endswith(f"drop-in {impl.name}")


@pytest.mark.parametrize("name", ["tokamax_xla", "tokamax_xla_chunked"])
def test_padded_rows_causal_bias_and_gqa_pass(name):
    mask = Mask(causal="top_left", lengths=Lengths(q=(3, 16), kv=(0, 33)))
    case = Case(batch=2, q_heads=4, kv_heads=2, q_len=16, kv_len=64, head_dim=32, bias=True, mask=mask)
    result = run_case(case, [contract.resolve(name)], grads=True)
    assert result.passed, result.subjects[0].failure
    notes = [c.note for c in result.subjects[0].comparisons if c.quantity == "out[empty]"]
    assert notes and "declared uniform" in notes[0]


def _window_case(q_len: int, window: Window, **kw) -> Case:
    return Case(batch=1, q_heads=2, kv_heads=1, q_len=q_len, kv_len=64, head_dim=32, mask=Mask(window=window), **kw)


@pytest.mark.parametrize(
    ("case", "local", "array"),
    [
        pytest.param(_window_case(64, Window(3, None)), (3, 64), False, id="aligned-unbounded-right"),
        pytest.param(_window_case(64, Window(None, 0)), (64, 0), False, id="causal-offset-0"),
        pytest.param(_window_case(64, Window(3, 2, offset=5)), None, True, id="shifted"),
        pytest.param(_window_case(64, None).replace(mask=Mask(chunk=Chunk(8))), None, True, id="chunk"),
        pytest.param(_window_case(64, None).replace(mask=Mask(causal="top_left")), None, False, id="is-causal"),
    ],
)
def test_windows_go_in_natively_where_tokamax_computes_them_and_as_the_mask_otherwise(case, local, array):
    got_local, got_array = _tokamax._split_mask(case)
    assert got_local == local and (got_array is not None) == array
    if array:
        np.testing.assert_array_equal(got_array, make_inputs(case).visible)


@pytest.mark.parametrize("name", ["tokamax_xla", "tokamax_xla_chunked"])
@pytest.mark.parametrize("q_len", [16, 128])
def test_a_window_at_unequal_lengths_goes_in_natively_and_passes(name, q_len):
    # tokamax 0.0.17 builds local_window_size as a CausalMask, at any lengths; 0.0.12 built the query rows' key
    # range from the key positions and raised, or agreed by accident, and the adapter passed such windows through
    # the boolean mask (docs/findings/tokamax_local_window_unequal_lengths.md).
    kernel = contract.resolve(name)
    case = _window_case(q_len, Window(3, 2))
    assert _tokamax._takes_unequal_windows(tokamax.dot_product_attention, kernel.implementation)
    assert kernel.split_mask(case) == ((3, 2), None)
    result = run_case(case, [kernel], grads=True)
    assert result.passed, result.subjects[0].failure


def test_a_window_goes_in_as_the_mask_where_local_window_size_fails_at_unequal_lengths():
    # As tokamax 0.0.12's xla implementation did: a broadcast error where q_len != kv_len.
    def unequal_fails(query, key, value, bias=None, mask=None, **kw):
        if kw.get("local_window_size") is not None and query.shape[1] != key.shape[1]:
            raise ValueError("Incompatible shapes for broadcasting")
        return tokamax.dot_product_attention(query, key, value, bias, mask, **kw)

    kernel = contract.resolve("tokamax_xla").dropin(unequal_fails, name="unequal_fails")
    assert not _tokamax._takes_unequal_windows(unequal_fails, "xla")
    case = _window_case(16, Window(3, 2))
    local, array = kernel.split_mask(case)
    assert local is None
    np.testing.assert_array_equal(array, make_inputs(case).visible)
    assert kernel.split_mask(_window_case(64, Window(3, 2)))[0] == (3, 2)


def test_native_window_and_highest_precision_pass():
    case = _window_case(64, Window(5, 1), dtype="bfloat16", blocks={_tokamax.PRECISION: 1})
    assert _tokamax._split_mask(case)[0] == (5, 1)
    result = run_case(case, [contract.resolve("tokamax_xla_chunked")], grads=False)
    assert result.passed, result.subjects[0].failure


def test_soft_cap_is_passed_natively():
    # Against paging.attend's capped truth, computed apart from the dense reference.
    case = _window_case(64, None, regime="large").replace(soft_cap=5.0)
    inputs = make_inputs(case)
    got = contract.resolve("tokamax_xla_chunked").run(case, inputs, grads=False).out
    visible = inputs.visible[:, 0]
    truth, uncapped = (
        paging.attend(
            *(a.astype(np.float64) for a in (inputs.q, inputs.k, inputs.v)), visible, scale=case.sm_scale, cap=c
        )
        for c in (5.0, None)
    )
    ruler = paging.attend(inputs.q, inputs.k, inputs.v, visible, scale=case.sm_scale, cap=5.0)
    result = compare("out", got, truth, ruler, tolerance(case.dtype, "out"))
    assert result.passed, result
    assert np.abs(truth - uncapped).max() > 100 * result.bound


@settings(max_examples=100, deadline=None, database=None)
@given(cases(contract.resolve("tokamax_xla")))
def test_every_drawn_case_is_inside_the_contract(case):
    assert contract.resolve("tokamax_xla").violations(case) == []


def test_a_batch_row_alone_differs_by_an_ulp_as_declared():
    # tokamax computes a batch of one unbatched, another program (docs/findings/tokamax_xla_batch_of_one.md):
    # on the CPU xla's dv of this row moves by an ulp (xla_chunked's quantities on other inputs), so batch
    # invariance is declared false for every quantity, and the exactness probe tightens what a release keeps.
    for name in ("tokamax_xla", "tokamax_xla_chunked"):
        assert contract.resolve(name).conventions.varies("batch_invariant") == QUANTITIES
    kernel = contract.resolve("tokamax_xla")
    case = Case(batch=2, q_heads=2, kv_heads=1, q_len=16, kv_len=16, head_dim=32)
    inputs = make_inputs(case)
    both = kernel.run(case, inputs, grads=True)
    alone = kernel.run(*batch_row(case, inputs, 1), grads=True)
    gap = np.abs(both.dv[1:] - alone.dv).max()
    assert 0 < gap < 8 * np.finfo(np.float32).eps * np.abs(alone.dv).max()  # a few ulp


def test_soft_cap_support_is_probed_from_the_implementation():
    # jax_nn (tokamax's cudnn path) raises NotImplementedError("`logits_soft_cap` not supported.")
    # before touching a GPU; xla_chunked computes it.
    assert _tokamax._takes_soft_cap(tokamax.dot_product_attention, "xla_chunked")
    assert not _tokamax._takes_soft_cap(tokamax.dot_product_attention, "cudnn")
