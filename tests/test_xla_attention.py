"""jax.nn.dot_product_attention as a kernel, and which GPU-only backends register on this host."""

from __future__ import annotations

import torch

from harness import compat, contract
from harness.case import Case
from harness.masks import Mask, Segments
from harness.runner import run_case


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
