"""The Pallas GPU adapter: its contract (shared segment ids, backward tile counts, causal
with q_len <= kv_len) and one small run under the interpreter."""

from __future__ import annotations

import pytest

from harness.core import contract
from harness.core.case import Case
from harness.core.masks import Mask, Segments
from harness.running.runner import run_case
from kernels.pallas_gpu import PallasGpu

BLOCKS = {"block_q": 32, "block_k": 64, "block_q_dkv": 16, "block_kv_dkv": 32, "block_q_dq": 32, "block_kv_dq": 64}
SHARED = Segments(q=(((0, 40), (1, 24)),), kv=(((0, 40), (1, 24)),))


def _case(**changes) -> Case:
    return Case(batch=1, q_heads=1, kv_heads=1, q_len=64, kv_len=64, head_dim=64, blocks=tuple(BLOCKS.items())).replace(
        **changes
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"mask": Mask(segments=Segments(q=(((0, 64),),), kv=(((1, 64),),)))}, "identical for q and kv", id="segs"
        ),
        pytest.param(
            {"mask": Mask(causal="top_left"), "kv_len": 32, "blocks": ()}, "reads key tiles past", id="causal"
        ),
        pytest.param({"mask": Mask(causal="bottom_right")}, "causal_bottom_right", id="bottom-right"),
        pytest.param({"blocks": {**BLOCKS, "block_kv_dkv": 16}}, "must equal kv_len/block_kv_dkv", id="tile-count"),
        pytest.param({"blocks": {**BLOCKS, "block_q": 48}}, "block_q=48 must be one of", id="tile"),
        pytest.param({"q_len": 64, "kv_len": 256, "blocks": ()}, "q_len/block_q_dq=64/32", id="default-blocks"),
        pytest.param({"blocks": {**BLOCKS, "num_warps": 3}}, "num_warps=3 must be one of (2, 4, 8)", id="warps"),
        pytest.param({"blocks": {**BLOCKS, "backward_xla": 2}}, "backward_xla=2 must be one of (1,)", id="bwd"),
        pytest.param(
            {"blocks": {**BLOCKS, "backward_xla": 1}, "dtype": "bfloat16"}, "pallas_gpu_xla_backward_16bit", id="bwd16"
        ),
    ],
)
def test_violations_name_the_value_and_limit(changes: dict, message: str) -> None:
    problems = PallasGpu().violations(_case(**changes))
    assert any(message in p for p in problems), problems


def test_shared_segments_and_causal_with_gqa_match_the_oracles_forward_and_backward() -> None:
    # With mha's other arguments: the Triton launch parameters and the residuals.
    blocks = {**BLOCKS, "num_warps": 2, "num_stages": 3}
    case = _case(
        q_heads=2, dtype="float16", head_dim=80, mask=Mask(causal="top_left", segments=SHARED), scale=0.25
    ).replace(blocks=tuple(blocks.items()), residuals=True)
    assert PallasGpu().violations(case) == []
    result = run_case(case, [contract.resolve("pallas_gpu")])
    assert result.passed, result.subjects[0].failure
    assert "lse" in {c.quantity for c in result.subjects[0].comparisons}


def test_the_xla_backward_matches_the_oracles_in_float32() -> None:
    case = _case(mask=Mask(causal="top_left")).replace(blocks=tuple({**BLOCKS, "backward_xla": 1}.items()))
    result = run_case(case, [contract.resolve("pallas_gpu")])
    assert result.passed, result.subjects[0].failure
