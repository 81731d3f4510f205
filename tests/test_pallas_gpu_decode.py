"""The Pallas GPU decode-attention adapter: contract, and fixed runs through mqa and gqa."""

from __future__ import annotations

import pytest

from tests import _removed

_removed.require(_removed.GPU_DECODE)  # before the adapter resolves below, which imports the module

from hypothesis import given, settings  # noqa: E402

from harness.core import contract  # noqa: E402
from harness.core.case import Case  # noqa: E402
from harness.core.masks import Lengths, Mask  # noqa: E402
from harness.core.strategies import cases  # noqa: E402
from harness.running.runner import run_case  # noqa: E402

DECODE = contract.resolve("pallas_gpu_decode")
BLOCKS = {"block_h": 16, "block_k": 16, "k_splits": 2}


def _case(**changes) -> Case:
    base = Case(batch=3, q_heads=4, kv_heads=2, q_len=1, kv_len=64, head_dim=32, blocks=BLOCKS)
    return base.replace(**changes)


@settings(max_examples=150, deadline=None, database=None)
@given(cases(DECODE))
def test_every_drawn_case_is_inside_the_contract(case):
    assert DECODE.violations(case) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"blocks": {**BLOCKS, "k_splits": 8}}, "ranges of >= 16 keys", id="short-split"),
        pytest.param({"blocks": {**BLOCKS, "block_k": 8}}, "block_k=8", id="block-k"),
        pytest.param({"blocks": {}}, "blocks must name", id="defaults-need-256"),
    ],
)
def test_violations_name_the_value(changes, message):
    assert any(message in v for v in DECODE.violations(_case(**changes)))


def test_gqa_with_starts_and_lengths_including_an_empty_row_passes():
    # Row 2 starts at its end: no visible key, declared zeros.
    mask = Mask(lengths=Lengths(kv=(1, 17, 64), kv_starts=(0, 3, 64)))
    result = run_case(_case(mask=mask), [DECODE], grads=False)
    assert result.passed, result.subjects[0].failure
    assert any(c.quantity == "out[empty]" for c in result.subjects[0].comparisons)


def test_mqa_passes():
    result = run_case(_case(kv_heads=1, dtype="bfloat16"), [DECODE], grads=False)
    assert result.passed, result.subjects[0].failure


def test_a_gqa_without_key_ranges_draws_none_and_is_called_without_them():
    # jax 0.4.30's gqa(q, k, v, sm_scale=1.0, block_h=16, ...) takes no start_idx or kv_seq_len: the adapter
    # passed them by position there, into sm_scale and block_h, and every case failed (nox -s history, 0.4.30).
    from jax.experimental.pallas.ops.gpu import decode_attention as upstream

    from kernels.pallas_gpu_decode import dropin

    def gqa(q, k, v, sm_scale=1.0, block_h=16, block_k=256, k_splits=16, num_warps=None, num_stages=2, grid=None,
            interpret=False, debug=False):  # fmt: skip # noqa: ANN001, ANN202
        return upstream.gqa(q, k, v, sm_scale=sm_scale, block_h=block_h, block_k=block_k, k_splits=k_splits,
                            interpret=interpret)  # fmt: skip

    old = dropin(gqa, name="gqa_0_4_30")
    assert old.capabilities.mask_components == frozenset()
    assert DECODE.capabilities.mask_components == {"kv_lengths", "kv_starts"}
    result = run_case(_case(), [old])
    assert result.passed, result.subjects[0].failure
