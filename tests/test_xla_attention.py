"""jax.nn.dot_product_attention as a kernel, and which GPU-only backends register on this host."""

from __future__ import annotations

import pytest
import torch

from harness.core import contract
from harness.core.case import Case
from harness.core.masks import Lengths, Mask, Segments, Window
from harness.running.runner import run_case
from harness.runtime import compat


def test_xla_attention_with_gqa_bias_causal_and_orphan_segments_matches_the_oracles() -> None:
    case = Case(
        batch=1,
        q_heads=4,
        kv_heads=2,
        q_len=100,
        kv_len=16,
        head_dim=32,
        dtype="bfloat16",
        bias=True,
        # Query segment 9 appears in no key: those rows see nothing (declared "uniform").
        mask=Mask(causal="top_left", segments=Segments(q=(((0, 90), (9, 10)),), kv=(((0, 16),),))),
    )
    impl = contract.resolve("jax_xla")
    assert impl.violations(case) == []
    result = run_case(case, [impl])
    assert result.passed, result.subjects[0].failure
    assert any(c.quantity == "out[empty]" for c in result.subjects[0].comparisons)


def test_gpu_only_backends_register_only_with_a_gpu() -> None:
    names = contract.names("kernel")
    assert ("jax_cudnn" in names) == (compat.jax_platform() == "gpu")
    for name in ("torch_flash", "torch_efficient", "torch_cudnn"):
        assert (name in names) == torch.cuda.is_available()


# The API's own parameters and the boolean-mask path for the same window and lengths.
NATIVE = Case(
    batch=2,
    q_heads=4,
    kv_heads=2,
    q_len=16,
    kv_len=100,
    head_dim=32,
    bias=True,
    residuals=True,
    mask=Mask(causal="top_left", window=Window(3, 5), lengths=Lengths(q=(10, 0), kv=(50, 7))),
)


def test_window_and_lengths_pass_natively_and_through_the_mask_argument() -> None:
    impl = contract.resolve("jax_xla")
    for case in (NATIVE, NATIVE.replace(blocks=(("mask_arg", 1),))):
        assert impl.violations(case) == []
        result = run_case(case, [impl], grads=False)
        assert result.passed, result.subjects[0].failure
        quantities = {c.quantity for c in result.subjects[0].comparisons}
        assert "lse" in quantities
        # Through query_seq_lengths padded rows are 0 (declared apart); through the mask, empty rows.
        assert ("out[padded]" in quantities) == (not case.blocks)


def test_windows_local_window_size_cannot_express_are_outside_the_contract() -> None:
    impl = contract.resolve("jax_xla")
    case = NATIVE.replace(mask=Mask(window=Window(3, 5, offset=2)))
    assert any("local_window_size" in v for v in impl.violations(case))
    assert any("local_window_size" in v for v in impl.violations(NATIVE.replace(mask=Mask(window=Window(None, 5)))))


@pytest.mark.parametrize(
    ("module", "mask"),
    [
        ("xla_window_off_by_one", Mask(window=Window(2, 1))),
        ("xla_ignores_kv_lengths", Mask(lengths=Lengths(kv=(9, 16)))),
    ],
)
def test_planted_dropins_are_caught_and_upstream_passes_the_same_case(module: str, mask: Mask) -> None:
    case = Case(batch=2, q_heads=2, kv_heads=1, q_len=16, kv_len=16, head_dim=32, mask=mask)
    planted = contract.resolve(f"jax_xla=tests.planted.{module}:dot_product_attention")
    upstream, bug = run_case(case, [contract.resolve("jax_xla"), planted], grads=False).subjects
    assert upstream.passed, upstream.failure
    assert not bug.passed and bug.comparisons[0].quantity == "out"


def test_float64_is_computed_with_a_float32_softmax() -> None:
    # docs/findings/jax_xla_float64_softmax_in_float32.md: a real divergence, kept visible.
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=16, head_dim=32, dtype="float64")
    got, torch_sdpa = run_case(
        case, [contract.resolve("jax_xla"), contract.resolve("torch_sdpa")], grads=False
    ).subjects
    assert torch_sdpa.passed, torch_sdpa.failure
    (out,) = [c for c in got.comparisons if c.quantity == "out"]
    assert not out.passed and out.max_abs > 1e-9


def test_float64_is_drawn_where_the_api_takes_it_even_while_the_library_computes_it_in_float32() -> None:
    # A divergence is the finding's to report (harness.running.known), never the adapter's to hide.
    import kernels.xla_attention as xla

    assert xla.float64_softmax_in_float32()  # jax 0.10.2, the default environment (the finding)
    assert xla.takes_float64()
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=16, head_dim=32, dtype="float64")
    assert not contract.resolve("jax_xla").violations(case)
    assert "float64" in contract.resolve("jax_xla").capabilities.dtypes
