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
        pytest.param(
            {"q_heads": 2, "mask": Mask(window=Window(3, 2))}, "dkv pass visits one key tile", id="gqa-one-kv-tile"
        ),
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


def test_the_fast_interpreter_loses_the_gqa_boolean_mask_dkv_accumulation():
    # tokamax's dkv kernel accumulates dk and dv over the query heads of a group through an output aliased
    # to an input (a dynamic mask's grid); the HLO interpreter reads the input as it was, the faithful
    # interpreter (and a TPU) as written: docs/findings/pallas_hlo_interpreter_aliased_revisit.md.
    # Two 128-key dkv tiles: over one, the faithful interpreter loses the shares too, as a TPU would
    # (docs/findings/tokamax_mosaic_gqa_mask_one_kv_tile.md; outside the contract).
    case = _case(q_heads=2, kv_heads=1, q_len=256, kv_len=256, mask=Mask(window=Window(3, 2)))
    inputs, kernel = make_inputs(case), contract.resolve("tokamax_mosaic")
    want, ruler = truth(case, inputs, grads=True), run_reference(case, inputs, grads=True, dtype=inputs.q.dtype)
    errors = {}
    for interpreter in ("fast", "faithful"):
        with using_interpret_options(InterpretOptions(interpreter=interpreter)):
            got = kernel.run(case, inputs, grads=True)
        errors[interpreter] = compare("dv", got.dv, want.dv, ruler.dv, tolerance(case.dtype, "dv"))
    assert errors["faithful"].passed, errors["faithful"]
    assert not errors["fast"].passed and errors["fast"].max_abs > 100 * errors["fast"].bound


def test_the_boolean_mask_is_the_oracles_mask_less_top_left_causal():
    case = _case(kv_len=256, mask=Mask(causal="top_left", window=Window(5, None, 3)))
    got = mosaic_module._shared_mask(case)
    np.testing.assert_array_equal(got, Mask(window=Window(5, None, 3)).visible_2d(128, 256))
    assert mosaic_module._shared_mask(_case(mask=Mask(causal="top_left"))) is None
