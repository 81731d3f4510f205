"""The splash adapter: its masks against the oracles' dense mask, its contract, a run, a planted bug."""

from __future__ import annotations

import numpy as np
import pytest

import kernels.pallas_splash as splash_module
from harness.core import contract
from harness.core.case import Case
from harness.core.masks import BlockSparse, Chunk, Lengths, Mask, Segments, Window, dense_mask
from harness.running.runner import run_case
from kernels.pallas_splash import FUSED, PallasSplash, splash_mask

PLANTED = "pallas_splash=tests.planted.splash_fwd_window_off_by_one:make_splash"


@pytest.mark.parametrize(
    "mask",
    [
        Mask(),
        Mask(causal="top_left"),
        Mask(causal="bottom_right"),
        Mask(window=Window(None, 0, -37)),
        Mask(window=Window(5, 3, 11)),
        Mask(window=Window(None, 4, 0)),
        Mask(chunk=Chunk(100)),
        Mask(block_sparse=BlockSparse(96, 64, ("1010", "0111"))),
        Mask(causal="top_left", window=Window(7, None)),
        Mask(
            chunk=Chunk(50), heads=(Mask(window=Window(3, 3)), Mask(block_sparse=BlockSparse(128, 128, ("10", "01"))))
        ),
    ],
    ids=repr,
)
def test_splash_masks_materialise_to_the_dense_mask(mask: Mask) -> None:
    # Splash's own mask classes, built from the description, against the oracles' dense
    # mask built from the same description by independent code.
    heads, q_len, kv_len = 2, 192, 256
    got = splash_mask(mask, heads=heads, q_len=q_len, kv_len=kv_len)[:, :, :]
    want = dense_mask(mask, batch=1, heads=heads, q_len=q_len, kv_len=kv_len)[0]
    np.testing.assert_array_equal(got, want)


def _case(**changes) -> Case:
    base = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64)
    return base.replace(**changes)


BLOCKS = {
    "block_q": 128,
    "block_kv": 256,
    "block_kv_compute": 128,
    "block_q_dkv": 128,
    "block_kv_dkv": 128,
    "block_kv_dkv_compute": 128,
    "block_q_dq": 128,
    "block_kv_dq": 128,
}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"q_len": 64}, "q_len=64 must be a multiple of 128", id="short"),
        pytest.param({"dtype": "float16"}, "dtype=float16", id="float16"),
        pytest.param({"bias": True}, "'bias'", id="bias"),
        pytest.param(
            {"blocks": {**BLOCKS, "block_kv": 384}}, "block_kv=384 must be a multiple of 128 dividing 256", id="kv-tile"
        ),
        pytest.param(
            {"blocks": {**BLOCKS, "block_kv_compute": 256, "block_kv": 128}}, "block_kv_compute=256", id="compute-tile"
        ),
        pytest.param({"blocks": {**BLOCKS, FUSED: 1}}, "unknown ['block_kv_dq', 'block_q_dq']", id="fused-with-dq"),
        pytest.param({"blocks": {"block_q": 128}}, "missing", id="partial"),
    ],
)
def test_violations_name_the_value_and_limit(changes: dict, message: str) -> None:
    problems = PallasSplash().violations(_case(kv_len=256, **changes))
    assert any(message in p for p in problems), problems


def test_in_contract_case_has_no_violations() -> None:
    assert PallasSplash().violations(_case(kv_len=256, blocks=BLOCKS)) == []


def test_gqa_per_head_windows_and_segments_match_the_oracles_forward_and_backward() -> None:
    case = Case(
        batch=1,
        q_heads=2,
        kv_heads=1,
        q_len=128,
        kv_len=128,
        head_dim=64,
        dtype="bfloat16",
        mask=Mask(
            segments=Segments(q=(((0, 100), (99, 28)),), kv=(((0, 128),),)),
            heads=(Mask(window=Window(16, 0, 0)), Mask(chunk=Chunk(96))),
        ),
        blocks=tuple({**{k: 128 for k in BLOCKS if "_dq" not in k}, FUSED: 1}.items()),
    )
    result = run_case(case, [contract.resolve("pallas_splash")])
    assert result.passed, result.subjects[0].failure


def test_planted_window_off_by_one_is_caught_and_upstream_passes_the_same_case() -> None:
    case = _case(mask=Mask(window=Window(3, 0)))
    planted = contract.resolve(PLANTED)
    assert isinstance(planted, PallasSplash) and planted.fn is not None
    result = run_case(case, [contract.resolve("pallas_splash"), planted], grads=False)
    upstream, bug = result.subjects
    assert upstream.passed, upstream.failure
    assert not bug.passed
    assert bug.comparisons[0].quantity == "out" and not bug.comparisons[0].passed


def test_planted_soft_cap_after_mask_is_caught_and_upstream_passes_the_same_case() -> None:
    # A cap of 1 leaves masked keys a weight of exp(-1 - max) under the bug: far past any bound.
    case = _case(mask=Mask(causal="top_left")).replace(soft_cap=1.0, sinks=True, residuals=True)
    planted = contract.resolve("pallas_splash=tests.planted.splash_soft_cap_after_mask:make_splash")
    upstream, bug = run_case(case, [contract.resolve("pallas_splash"), planted], grads=False).subjects
    assert upstream.passed, upstream.failure
    assert {c.quantity for c in upstream.comparisons} >= {"out", "lse"}
    assert not bug.passed and bug.comparisons[0].quantity == "out"


def test_planted_dsinks_sign_is_caught_on_dsinks_alone_and_upstream_passes_the_same_case() -> None:
    # GQA, so the sinks' gradient comes back through splash's per-kv-head reshape; causal, so rows
    # differ in how much weight their sink takes. The bug flips dsinks (|error| = 2 |dsinks|, ~0.1
    # here, against a float32 bound of ~1e-3) and nothing else. The drop-in is a copy of splash's module:
    # given upstream's BlockSizes, its dkv kernel skipped every key tile and dk, dv failed too.
    case = Case(
        batch=1, q_heads=2, kv_heads=1, q_len=128, kv_len=128, head_dim=64, mask=Mask(causal="top_left"), sinks=True
    )
    planted = contract.resolve("pallas_splash=tests.planted.splash_dsinks_sign:make_splash")
    upstream, bug = run_case(case, [contract.resolve("pallas_splash"), planted]).subjects
    assert upstream.passed, upstream.failure
    assert {c.quantity for c in upstream.comparisons} >= {"dq", "dk", "dv", "dsinks"}
    assert [c.quantity for c in bug.comparisons if not c.passed] == ["dsinks"], bug.failure


def test_a_drop_in_copied_from_splash_gets_its_own_modules_block_sizes() -> None:
    # A copy of splash's module has its own QKVLayout, and its dkv kernel compares layouts by
    # identity: upstream's BlockSizes there skip every key tile (the test above, dk and dv).
    from tests.planted import splash_dsinks_sign

    copy = splash_dsinks_sign._module
    planted = contract.resolve("pallas_splash=tests.planted.splash_dsinks_sign:make_splash")
    for blocks in ((), tuple(BLOCKS.items())):
        got = planted._block_sizes(_case(blocks=blocks))
        assert type(got) is copy.BlockSizes and got.k_layout is copy.QKVLayout.HEAD_DIM_MINOR
    assert type(PallasSplash()._block_sizes(_case())) is not copy.BlockSizes


def test_valid_lengths_go_in_as_segment_ids_and_bottom_right_causal_sits_at_each_rows_diagonal() -> None:
    # Before lengths reached the kernel, splash saw every key of every row here and failed.
    lengths = Lengths(q=(100, 3), kv=(200, 40), kv_starts=(0, 9))
    case = Case(
        batch=2,
        q_heads=2,
        kv_heads=1,
        q_len=128,
        kv_len=256,
        head_dim=64,
        mask=Mask(causal="bottom_right", lengths=lengths),
    )
    result = run_case(case, [contract.resolve("pallas_splash")], grads=False)
    assert result.passed, result.subjects[0].failure


def test_head_dims_follow_what_the_installed_splash_takes(monkeypatch) -> None:
    # jax 0.7.0's splash raises for a head_dim that is no multiple of 128 (the matrix's jax 0.7.0
    # cell); the probe asks the library, and the contract follows it.
    assert splash_module.takes_head_dim(128)
    assert splash_module.LANE_HEAD_DIMS_ONLY == (not splash_module.takes_head_dim(64))
    assert all(d % 128 == 0 for d in splash_module.HEAD_DIMS) or not splash_module.LANE_HEAD_DIMS_ONLY
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64)
    monkeypatch.setattr(splash_module, "LANE_HEAD_DIMS_ONLY", True)
    assert any("head_dim=64 must be a multiple of 128" in v for v in PallasSplash().violations(case))
    monkeypatch.setattr(splash_module, "LANE_HEAD_DIMS_ONLY", False)
    assert not any("head_dim" in v for v in PallasSplash().violations(case))


def test_a_mask_hiding_every_key_in_identical_heads_is_outside_the_contract_where_splash_asserts() -> None:
    # Splash's mask processing asserts (current_block_mask.size > 0) when one mask, the same in every
    # head, hides every key (the matrix's jax 0.7.0 cell; jax 0.10.2 too): the probe asks the library,
    # the violation asks it for the case's own mask, and the strategies draw no such mask.
    below = Mask(window=Window(None, 0, -128))
    same = _case(q_heads=2, kv_heads=2, mask=Mask(heads=(below, below)))
    different = _case(q_heads=2, kv_heads=2, mask=Mask(heads=(below, Mask(window=Window(None, 0, -256)))))
    visible = _case(q_heads=2, kv_heads=2, mask=Mask(heads=(below, Mask())))
    hidden = "hides every key"
    assert not splash_module.takes_hidden_mask()  # jax 0.10.2, the default environment
    assert "some_key_visible" in PallasSplash.capabilities.restrictions
    assert any(hidden in v for v in PallasSplash().violations(_case(mask=below)))
    assert any(hidden in v for v in PallasSplash().violations(same))
    assert not any(hidden in v for v in PallasSplash().violations(different))  # two masks: no shrunk grid
    assert not any(hidden in v for v in PallasSplash().violations(visible))


def test_a_chunk_mask_is_drawn_only_where_the_mask_module_has_chunked_causal_mask():
    # jax 0.4.30 and 0.5.3 have no ChunkedCausalMask: a chunk case there raised AttributeError, reported
    # as the kernel's failure (nox -s history, 0.4.30).
    import types

    from harness.core.masks import MASK_COMPONENTS

    old = splash_module.mask_components(types.SimpleNamespace(CausalMask=None, LocalMask=None))
    assert old == MASK_COMPONENTS - {"chunk"}
    assert splash_module.mask_components(splash_module.mask_lib) == MASK_COMPONENTS
