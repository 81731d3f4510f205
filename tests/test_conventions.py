"""Conventions are declared by each implementation and normalised in its adapter."""

import jax.numpy as jnp
import pytest
from jax.experimental.pallas.ops.tpu import flash_attention as upstream

from harness.core.case import Case
from harness.core.contract import resolve
from harness.core.masks import Mask, Segments
from harness.running.runner import run_case
from kernels.pallas_flash import PallasFlash

FLASH = resolve("pallas_flash")
SDPA = resolve("torch_sdpa")
# Batch row 0: queries 100..127 carry segment 99, which no key has: 28 rows see no key.
ORPHANS = Segments(q=(((0, 100), (99, 28)),), kv=(((0, 60), (1, 196)),))


def quantities(result, name):
    subject = next(s for s in result.subjects if s.implementation == name)
    assert subject.error is None, subject.traceback
    return {c.quantity: c for c in subject.comparisons}


def test_bias_is_added_after_scaling_once_the_adapter_divides_it():
    case = Case(batch=1, q_heads=2, kv_heads=2, q_len=128, kv_len=256, head_dim=64, bias=True, scale=0.5, seed=3)
    result = run_case(case, [FLASH, SDPA])
    assert result.passed, [s.failure for s in result.subjects]
    assert "dbias" in quantities(result, "pallas_flash")


def _raw_bias(q, k, v, ab=None, segment_ids=None, **kw):
    # Undo the adapter's normalisation: the kernel then sees the SDPA bias as its own ab.
    scale = kw["sm_scale"]
    return upstream.flash_attention(q, k, v, None if ab is None else ab * jnp.float32(scale), segment_ids, **kw)


def test_without_normalisation_the_bias_convention_difference_is_caught():
    case = Case(batch=1, q_heads=2, kv_heads=2, q_len=128, kv_len=256, head_dim=64, bias=True, scale=0.5, seed=3)
    result = run_case(case, [PallasFlash(_raw_bias, name="raw-bias")], grads=False)
    assert not quantities(result, "raw-bias")["out"].passed


def test_gqa_goes_through_the_adapter_and_gradients_sum_back():
    case = Case(batch=1, q_heads=4, kv_heads=1, q_len=128, kv_len=128, head_dim=32, seed=1)
    result = run_case(case, [FLASH, SDPA])
    assert result.passed, [s.failure for s in result.subjects]
    assert quantities(result, "pallas_flash")["dk"].max_abs < 1e-5


def test_rows_with_no_visible_key_are_checked_against_each_declaration():
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=64, mask=Mask(segments=ORPHANS), seed=2)
    result = run_case(case, [FLASH, SDPA])
    assert result.passed, [s.failure for s in result.subjects]
    flash, sdpa = quantities(result, "pallas_flash"), quantities(result, "torch_sdpa")
    assert "28 rows, declared uniform" == flash["out[empty]"].note
    assert "28 rows, declared zeros" == sdpa["out[empty]"].note


class _DeclaresZeros(PallasFlash):
    def empty_rows(self, case):
        return "zeros"


def test_a_wrong_declaration_fails_rather_than_passing_as_garbage():
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=64, mask=Mask(segments=ORPHANS), seed=2)
    result = run_case(case, [_DeclaresZeros(name="claims-zeros")], grads=False)
    q = quantities(result, "claims-zeros")
    assert q["out"].passed and not q["out[empty]"].passed


@pytest.mark.parametrize("causal", [None, "top_left"])
def test_causal_alignment_with_unequal_lengths(causal):
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=128, head_dim=64, mask=Mask(causal=causal), seed=4)
    result = run_case(case, [FLASH, SDPA], grads=False)
    assert result.passed, [s.failure for s in result.subjects]


def test_rows_with_no_visible_key_have_their_gradient_judged_where_they_have_a_cotangent():
    """An odd seed gives the 28 rows a cotangent: pallas_flash's uniform rows (its fill added to the logits) are
    judged against the gradient of their average of every value row, torch_sdpa's zeros against no gradient."""
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=64, mask=Mask(segments=ORPHANS), seed=3)
    result = run_case(case, [FLASH, SDPA])
    assert result.passed, [s.failure for s in result.subjects]
    flash, sdpa = quantities(result, "pallas_flash"), quantities(result, "torch_sdpa")
    assert flash["out[empty]"].note == "28 rows, declared uniform; their gradients judged (uniform, fill added)"
    assert sdpa["out[empty]"].note == "28 rows, declared zeros; their gradients judged (zeros)"
