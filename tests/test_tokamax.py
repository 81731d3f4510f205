"""tokamax adapters: registered where tokamax imports, and fixed runs with lengths, causal, bias and GQA."""

from __future__ import annotations

import pytest

pytest.importorskip("tokamax")

from harness import compat, contract  # noqa: E402
from harness.case import Case  # noqa: E402
from harness.masks import Lengths, Mask  # noqa: E402
from harness.runner import run_case  # noqa: E402
from kernels import _tokamax  # noqa: E402


def test_capabilities_come_from_the_signature_and_the_hardware():
    assert {"xla", "xla_chunked"} <= set(_tokamax.implementations())
    names = contract.names("kernel")
    assert {"tokamax_xla", "tokamax_xla_chunked"} <= set(names)
    # mosaic needs a TPU, triton and cudnn a GPU: not registered on a CPU host.
    for impl in ("mosaic", "triton", "cudnn"):
        assert (f"tokamax_{impl}" in names) == _tokamax.available(impl)
    # XLA:CPU refuses tokamax's float16 dot preset: float16 is drawn only off a CPU backend.
    assert ("float16" in contract.resolve("tokamax_xla").capabilities.dtypes) == (compat.jax_platform() != "cpu")


@pytest.mark.parametrize("name", ["tokamax_xla", "tokamax_xla_chunked"])
def test_padded_rows_causal_bias_and_gqa_pass(name):
    mask = Mask(causal="top_left", lengths=Lengths(q=(3, 16), kv=(0, 33)))
    case = Case(batch=2, q_heads=4, kv_heads=2, q_len=16, kv_len=64, head_dim=32, bias=True, mask=mask)
    result = run_case(case, [contract.resolve(name)], grads=True)
    assert result.passed, result.subjects[0].failure
    notes = [c.note for c in result.subjects[0].comparisons if c.quantity == "out[empty]"]
    assert notes and "declared uniform" in notes[0]
