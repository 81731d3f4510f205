"""Declared features of a kernel, the features of a case, and a run's pairwise coverage (harness.core.features)."""

from __future__ import annotations

import pytest

from harness.core import contract, features
from harness.core.case import Case
from harness.core.masks import Mask, Segments
from tests import _fakes

FLASH = contract.registry()["pallas_flash"]


def _flash(**changes):
    from kernels.pallas_flash import uniform_blocks

    base = dict(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=512, head_dim=64, blocks=uniform_blocks())
    return Case(**{**base, **changes})


def test_pallas_flash_declares_its_masks_dtypes_and_tiling_classes():
    declared = features.declared(FLASH)
    assert declared["mask"] == ("none", "bias", "causal_top_left", "segments")
    assert declared["dtype"] == ("float32", "bfloat16", "float16")
    assert declared["tiling"] == ("one_tile", "several_q_tiles", "several_major", "several_minor")
    assert declared["heads"] == ("mha", "gqa") and declared["lengths"] == ("equal", "unequal")


def test_a_case_has_its_mask_components_tiling_classes_heads_and_lengths():
    segments = Segments(q=(((0, 100), (1, 156)),), kv=(((0, 300), (1, 212)),))
    blocks = dict(_flash().blocks) | {"block_k_major": 256}
    case = _flash(q_heads=2, mask=Mask(causal="top_left", segments=segments), bias=True, blocks=blocks)
    assert features.of(case, FLASH) == {
        "mask:bias",
        "mask:causal_top_left",
        "mask:segments",
        "tiling:several_q_tiles",
        "tiling:several_major",
        "tiling:several_minor",
        "dtype:float32",
        "regime:normal",
        "heads:gqa",
        "lengths:unequal",
        "option:none",  # flash may return its residuals
    }
    one = _flash(q_len=128, kv_len=128)
    assert features.of(one, FLASH) >= {"mask:none", "tiling:one_tile", "heads:mha", "lengths:equal"}


def test_a_decode_kernel_has_unequal_lengths_only_and_its_plainest_case_has_them():
    # One query on 64 keys and more: equal lengths are never drawn, so they are not declared (a coverage
    # table counted them missing), and a failure at the plainest decode case is not said to need unequal ones.
    from harness.running.signatures import plain

    paged = contract.registry()["pallas_paged"]
    assert features.declared(paged)["lengths"] == ("unequal",)
    assert "lengths:unequal" in plain(paged) and "lengths:equal" not in plain(paged)
    assert features.declared(FLASH)["lengths"] == ("equal", "unequal") and "lengths:equal" in plain(FLASH)


def test_a_kernels_options_are_a_group_each_paired_with_every_dtype():
    # SPL-5 (docs/history.md): splash's dsinks was summed in 16 bits; the one sinks case the smoke set
    # gave was float32, since options were not features the pairwise plan pairs with a dtype.
    splash = contract.registry()["pallas_splash"]
    assert features.declared(splash)["option"] == ("none", "sinks", "soft_cap", "residuals")
    pairs = features.declared_pairs(splash)
    assert {frozenset({"option:sinks", f"dtype:{d}"}) for d in splash.capabilities.dtypes} <= pairs
    assert frozenset({"option:sinks", "option:soft_cap"}) in pairs
    assert frozenset({"option:none", "option:sinks"}) not in pairs
    case = Case(batch=1, q_heads=2, kv_heads=1, q_len=128, kv_len=128, head_dim=128, dtype="bfloat16", sinks=True)
    assert {"option:sinks", "dtype:bfloat16"} <= features.of(case, splash)


def test_exclusive_values_pair_with_nothing_in_their_group():
    pairs = features.declared_pairs(FLASH)
    assert frozenset({"mask:causal_top_left", "mask:segments"}) in pairs
    assert frozenset({"tiling:several_major", "tiling:several_minor"}) in pairs
    assert frozenset({"mask:none", "mask:bias"}) not in pairs
    assert frozenset({"tiling:one_tile", "tiling:several_major"}) not in pairs
    assert frozenset({"dtype:float32", "dtype:bfloat16"}) not in pairs
    assert frozenset({"mask:none", "dtype:float16"}) in pairs


def test_coverage_counts_the_pairs_of_the_first_cases_only():
    kernel = _fakes.CORRECT  # float32 only, one head, masks causal and bias, lengths 16 and 32
    total = len(features.declared_pairs(kernel))
    first = _fakes.small_case(mask=Mask(causal="top_left"), bias=True)
    second = _fakes.small_case(q_len=32, regime="large")
    one = features.coverage(kernel, [first, second], within=1)
    both = features.coverage(kernel, [first, second], within=2)
    assert one.cases == 1 and both.cases == 2
    # first: causal, bias, float32, normal, mha, unequal: every pair among those six.
    assert one.pairs == 15 and one.declared_pairs == total
    assert "lengths:equal + regime:large" in one.missing_pairs
    assert "lengths:equal + regime:large" not in both.missing_pairs
    assert both.pairs > one.pairs and both.pair_share == both.pairs / total
    assert "first 2 cases" in both.line()


def test_coverage_reads_back_what_it_writes_and_names_a_missing_field():
    covered = features.coverage(
        _fakes.CORRECT, [Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=32, head_dim=64)]
    )
    assert features.Coverage.from_json(covered.to_json()) == covered
    with pytest.raises(ValueError, match=r"missing fields \['missing_pairs'\]"):
        features.Coverage.from_json({k: v for k, v in covered.to_json().items() if k != "missing_pairs"})
