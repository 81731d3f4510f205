"""The compiled reference path (harness.core.jaxvjp.compiled_outputs) computes what the operations one by one do."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

from harness.core import jaxvjp
from harness.core.case import Case
from harness.core.inputs import make_inputs
from harness.core.masks import Mask, Segments
from harness.runtime import isa, placement
from oracles import jax_reference


def _eager(case: Case, inputs) -> jaxvjp.Outputs:
    """The reference as it ran before it was compiled: one operation at a time."""
    device = placement.reference_device()
    visible = jax.device_put(inputs.visible, device)

    def f(q, k, v, *rest):
        # jax_outputs passes bias, then sinks, each only when the case has it.
        bias = rest[0] if case.bias else None
        sinks = rest[-1] if case.sinks else None
        return jax_reference.attention(q, k, v, bias, visible, case.sm_scale, sinks=sinks)

    return jaxvjp.jax_outputs(f, inputs, grads=True, device=device)


CASE = Case(batch=1, q_heads=2, kv_heads=1, q_len=64, kv_len=128, head_dim=32, mask=Mask(causal="top_left"), seed=5)


@pytest.mark.parametrize(("dtype", "sinks"), [("bfloat16", False), ("float16", False), ("bfloat16", True)])
def test_half_precision_rulers_round_as_the_operations_one_by_one(dtype: str, sinks: bool) -> None:
    # Without COMPILER_OPTIONS the fused program keeps bfloat16 intermediates in float32 and
    # the ruler turns more precise than the operations it stands for. With sinks, their
    # gradient too: the sinks are a primal of the program, after the bias.
    if dtype == "float16" and (refused := isa.float16_refusal()):
        pytest.skip(refused)
    case = CASE.replace(dtype=dtype, bias=True, sinks=sinks)
    inputs = make_inputs(case)
    got = jax_reference.run_reference(case, inputs, grads=True, dtype=inputs.q.dtype)
    want = _eager(case, inputs)
    assert (got.dsinks is not None) == sinks
    for q in ("out", "dq", "dk", "dv", "dbias", "dsinks"):
        np.testing.assert_array_equal(got.get(q), want.get(q), err_msg=q)


# An HLO instruction: its name, element type, opcode and operands.
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\w+)\[[^\]]*\]\S* ([\w-]+)\(([^)]*)\)")
# Opcodes through which a value reaches its consumer in the same loop without a rounding (a negated
# product is contracted too: into a negated FMA).
_UNCHANGED = {"bitcast", "broadcast", "copy", "reshape", "transpose", "negate"}


def _contractible(hlo: str) -> list[str]:
    """Each add or subtract of a computation that takes a multiply of the same computation (through
    _UNCHANGED ops): a pair LLVM may contract into one FMA where the ISA has it (jaxvjp.COMPILER_OPTIONS)."""
    found, defined = [], {}
    for line in hlo.splitlines():
        if line.endswith("{"):  # a new computation: its instructions are its own
            defined = {}
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        name, dtype, op, operands = m.groups()
        defined[name] = (dtype, op, re.findall(r"%([\w.-]+)", operands))
        for operand in defined[name][2] if op in ("add", "subtract") else []:
            while operand in defined and defined[operand][1] in _UNCHANGED:
                operand = defined[operand][2][0]
            if defined.get(operand, (None, None))[1] == "multiply":
                found.append(f"{name} = {op}(%{operand} = multiply(...), ...) in {dtype}")
    return found


def test_the_contractible_pattern_is_found() -> None:
    x = np.ones(64, np.float32)  # float32: XLA compiles it at every level (isa.float16_refusal)
    fused = jax.jit(lambda a, b, c: a * b + c).lower(x, x, x).compile().as_text()
    assert _contractible(fused) == ["add.0 = add(%mul.0 = multiply(...), ...) in f32"]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("options", [{}, {"soft_cap": 30.0}, {"sinks": True}], ids=["plain", "soft_cap", "sinks"])
def test_no_ruler_program_leaves_a_product_to_the_add_that_consumes_it(dtype: str, options: dict) -> None:
    # Where the ISA has an FMA for the dtype (AVX512-FP16 for float16, FMA3 for float32) such a pair
    # rounds once where the operations one by one round twice; a test on any host sees the pairs
    # themselves. Forward and backward: s * scale + bias, the softmax's and the soft cap's gradients.
    if dtype == "float16" and (refused := isa.float16_refusal()):
        pytest.skip(refused)
    jaxvjp._COMPILED.clear()
    case = CASE.replace(dtype=dtype, bias=True, **options)
    inputs = make_inputs(case)
    jax_reference.run_reference(case, inputs, grads=True, dtype=inputs.q.dtype)
    (program,) = jaxvjp._COMPILED.values()
    assert _contractible(program.as_text()) == []


def test_one_program_serves_every_mask_and_scale_of_a_shape() -> None:
    jaxvjp._COMPILED.clear()
    segments = Segments(q=(((0, 30), (1, 34)),), kv=(((0, 100), (1, 28)),))
    for case in (CASE, CASE.replace(mask=Mask(segments=segments), scale=0.25, seed=9)):
        inputs = make_inputs(case)
        got = jax_reference.run_reference(case, inputs, grads=True, dtype=inputs.q.dtype)
        want = _eager(case, inputs)
        np.testing.assert_array_equal(got.out, want.out)
        for q in ("dq", "dk", "dv"):
            # float32 sums may associate differently in one program: a few ulps.
            np.testing.assert_allclose(got.get(q), want.get(q), rtol=0, atol=4 * np.finfo(np.float32).eps)
    assert len(jaxvjp._COMPILED) == 1


def test_compiled_programs_outlive_jax_clear_caches_but_stay_bounded(monkeypatch) -> None:
    jaxvjp._COMPILED.clear()
    monkeypatch.setattr(jaxvjp, "COMPILED_KEEP", 2)
    for q_len in (16, 32, 64):
        case = CASE.replace(q_len=q_len, mask=Mask())
        inputs = make_inputs(case)
        jax_reference.run_reference(case, inputs, grads=False, dtype=inputs.q.dtype)
        jax.clear_caches()
    assert len(jaxvjp._COMPILED) == 2
    assert [key[-1][0][0][2] for key in jaxvjp._COMPILED] == [32, 64]  # q's length: the oldest went first
