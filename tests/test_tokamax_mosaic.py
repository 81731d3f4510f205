"""The tokamax Mosaic TPU adapter: registered off a TPU, its gate opened around the call only, its
contract, and runs under both Pallas interpreters (the fast one diverging where the faithful one agrees)."""

from __future__ import annotations

import pytest

pytest.importorskip("tokamax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from jax._src import callback, effects  # noqa: E402

import kernels.tokamax_mosaic as mosaic_module  # noqa: E402
from harness.core import contract  # noqa: E402
from harness.core.case import Case  # noqa: E402
from harness.core.compare import compare, tolerance  # noqa: E402
from harness.core.inputs import make_inputs  # noqa: E402
from harness.core.masks import Lengths, Mask, Segments, Window  # noqa: E402
from harness.core.reference import run_reference, truth  # noqa: E402
from harness.core.strategies import cases  # noqa: E402
from harness.running.runner import run_case  # noqa: E402
from harness.runtime.interpret import InterpretOptions, using_interpret_options  # noqa: E402
from kernels.tokamax_mosaic import GATED, TokamaxMosaic, gate_opened, remat_takes_callbacks  # noqa: E402

CONFIG = {
    "block_q": 128,
    "block_kv": 256,
    "block_kv_compute": 128,
    "q_layout": 2,
    "k_layout": 1,
    "v_layout": 2,
    "block_q_dkv": 128,
    "block_kv_dkv": 256,
    "block_kv_dkv_compute": 128,
    "use_base2_exp": 1,
}


def _case(**changes) -> Case:
    return Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=128).replace(**changes)


def test_registered_here_with_the_device_gate_closed_outside_the_call():
    assert "tokamax_mosaic" in contract.names("kernel")
    cpu = jax.devices("cpu")[0]
    ops = [cls() for cls in GATED]
    assert not any(op.supported_on(cpu) for op in ops)
    with gate_opened():
        assert all(op.supported_on(cpu) for op in ops)
    assert not any(op.supported_on(cpu) for op in ops)
    # Every run says so: the conventions (run.json's "conventions") name the opened gate.
    assert "supported_on" in TokamaxMosaic.conventions.notes


def test_remat_takes_the_interpreters_callbacks_inside_the_block_only():
    allowed = effects.custom_derivatives_allowed_effects
    before = set(allowed._effect_types)
    with remat_takes_callbacks():
        assert {callback.IOEffect, callback.OrderedIOEffect} <= allowed._effect_types
    assert allowed._effect_types == before


@settings(max_examples=60, deadline=None, database=None)
@given(cases(contract.resolve("tokamax_mosaic")))
def test_every_drawn_case_is_inside_the_contract(case):
    assert contract.resolve("tokamax_mosaic").violations(case) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"bias": True}, "['bias'] not in", id="bias"),
        pytest.param({"mask": Mask(lengths=Lengths(q=None, kv=(64,)))}, "['kv_lengths'] not in", id="lengths"),
        pytest.param(
            {"mask": Mask(segments=Segments(q=(((0, 128),),), kv=(((0, 128),),)))}, "['segments']", id="segments"
        ),
        pytest.param({"dtype": "float16"}, "dtype=float16 not in", id="float16"),
        pytest.param({"q_len": 64}, "q_len=64 must be a multiple of 128", id="short"),
        pytest.param({"blocks": {"block_q": 128}}, "blocks must name", id="config-incomplete"),
        pytest.param(
            {"kv_len": 256, "blocks": {**CONFIG, "q_layout": 3}}, "q_layout=3 is not a QKVLayout", id="layout"
        ),
        pytest.param(
            {"kv_len": 256, "blocks": {**CONFIG, "block_kv_compute": 256, "block_kv": 128}},
            "block_kv_compute=256 must be a multiple of 128 dividing 128",
            id="compute-tile",
        ),
        pytest.param({"blocks": {"precision_highest": 2}}, "precision_highest=2 must be 1", id="precision"),
    ],
)
def test_cases_outside_the_contract_say_why(changes, message):
    problems = contract.resolve("tokamax_mosaic").violations(_case(**changes))
    assert any(message in p for p in problems), problems


def test_a_drop_in_takes_no_config():
    impl = contract.resolve("tokamax_mosaic=tokamax:dot_product_attention")
    assert isinstance(impl, TokamaxMosaic) and not impl.capabilities.residuals
    problems = impl.violations(_case(kv_len=256, blocks=CONFIG))
    assert any("a drop-in takes no config" in p for p in problems), problems


@pytest.mark.parametrize("interpreter", ["fast", "faithful"])
def test_gqa_causal_with_a_config_and_residuals_passes(interpreter):
    # Two batch rows: tokamax vmaps over them (the faithful interpreter's calls go one row at a time).
    case = Case(
        batch=2,
        q_heads=4,
        kv_heads=2,
        q_len=128,
        kv_len=256,
        head_dim=64,
        mask=Mask(causal="top_left"),
        residuals=True,
        blocks={**CONFIG, "precision_highest": 1},
    )
    result = run_case(case, [contract.resolve("tokamax_mosaic")], grads=True, policy=interpreter)
    subject = result.subjects[0]
    assert result.passed, subject.failure
    assert {c.quantity for c in subject.comparisons} >= {"out", "dq", "dk", "dv", "lse"}


def test_both_interpreters_keep_the_gqa_boolean_mask_dkv_accumulation():
    # From three 128-key dkv tiles tokamax 0.0.17's dkv kernel still sums dk and dv over the query heads of a group
    # through an output aliased to an input (a boolean mask's dynamic grid). jax 0.11.2's HLO interpreter carries an
    # aliased output's writes into its input, as the faithful interpreter (and a TPU) do; earlier ones read the
    # input as passed and kept the last head's share alone (docs/findings/pallas_hlo_interpreter_aliased_revisit.md).
    case = _case(q_heads=2, kv_heads=1, q_len=384, kv_len=384, mask=Mask(window=Window(3, 2)))
    assert mosaic_module.sums_dkv_in_place(kv_tiles=3)  # the case takes the aliased path
    inputs, kernel = make_inputs(case), contract.resolve("tokamax_mosaic")
    want, ruler = truth(case, inputs, grads=True), run_reference(case, inputs, grads=True, dtype=inputs.q.dtype)
    for interpreter in ("fast", "faithful"):
        with using_interpret_options(InterpretOptions(interpreter=interpreter)):
            got = kernel.run(case, inputs, grads=True)
        for quantity in ("dk", "dv"):
            error = compare(
                quantity,
                getattr(got, quantity),
                getattr(want, quantity),
                getattr(ruler, quantity),
                tolerance(case.dtype, quantity),
            )
            assert error.passed, (interpreter, error)


def test_gqa_with_a_boolean_mask_over_one_kv_tile_passes_where_tokamax_sums_dkv_outside_the_kernel():
    # tokamax 0.0.16 sums a group's dk and dv shares outside the dkv kernel where the pass has one or two key tiles;
    # 0.0.12 summed them in place, and over one tile kept the last query head's share alone
    # (docs/findings/tokamax_mosaic_gqa_mask_one_kv_tile.md): such cases were outside its contract.
    case = _case(q_heads=2, mask=Mask(window=Window(3, 2)))
    kernel = contract.resolve("tokamax_mosaic")
    assert not mosaic_module.sums_dkv_in_place()
    assert kernel.violations(case) == []
    result = run_case(case, [kernel], grads=True, policy="faithful")
    assert result.passed, result.subjects[0].failure


def test_where_tokamax_sums_dkv_in_place_a_one_tile_gqa_mask_case_is_outside_the_contract(monkeypatch):
    monkeypatch.setattr(mosaic_module, "sums_dkv_in_place", lambda: True)
    kernel = contract.resolve("tokamax_mosaic")
    problems = kernel.violations(_case(q_heads=2, mask=Mask(window=Window(3, 2))))
    assert any("dkv pass visits one key tile" in p for p in problems), problems
    # Two visible key tiles: inside.
    assert kernel.violations(_case(q_heads=2, kv_len=256, mask=Mask(window=Window(3, 200)))) == []


def test_the_config_tiles_are_the_multiples_the_installed_configs_declare():
    # tokamax 0.0.12 declared them with pydantic.conint(multiple_of=NUM_LANES), 0.0.17 with Annotated[int, Field(...)].
    from tokamax._src.ops.attention import pallas_mosaic_tpu_common as common

    assert mosaic_module.TILE_MULTIPLES == dict.fromkeys(
        (*mosaic_module.FORWARD_BLOCKS[:3], *mosaic_module.DKV_BLOCKS), common.NUM_LANES
    )


def test_the_boolean_mask_is_the_oracles_mask_less_top_left_causal():
    case = _case(kv_len=256, mask=Mask(causal="top_left", window=Window(5, None, 3)))
    got = mosaic_module._shared_mask(case)
    np.testing.assert_array_equal(got, Mask(window=Window(5, None, 3)).visible_2d(128, 256))
    assert mosaic_module._shared_mask(_case(mask=Mask(causal="top_left"))) is None
