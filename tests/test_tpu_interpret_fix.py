"""kernels/_tpu_interpret_fix.py: the TPU interpret mode, patched where it lacks them, reads through reshaped,
bitcast and transposed refs and makes masked stores into 3-D refs, exactly; ragged_paged_attention then equals
upstream's own reference; and every other kernel computes the same bits with the patch as without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa

from harness.runtime import interpret
from kernels import _tpu_interpret_fix as interpret_fix

ROOT = Path(__file__).resolve().parent.parent
FAITHFUL = interpret.InterpretOptions(interpreter="faithful")


@pytest.fixture(scope="module", autouse=True)
def served():
    status = interpret_fix.ensure()
    assert status.error is None, status.error
    return status


def faithful(kernel, x, out_shape, **kw):
    with interpret.forced_interpret(), interpret.using_interpret_options(FAITHFUL), interpret.tpu_kernel_context():
        return np.asarray(pl.pallas_call(kernel, out_shape=out_shape, **kw)(x))


def test_the_one_line_reshaped_read_equals_x_reshape():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.reshape(16, 128)[...]

    x = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)
    got = faithful(kernel, x, jax.ShapeDtypeStruct((16, 128), jnp.float32))
    np.testing.assert_array_equal(got, np.asarray(x).reshape(16, 128))


@pytest.mark.parametrize(
    ("shape", "read", "expect"),
    [
        pytest.param((4, 8, 128), lambda r: r.reshape(2, 16, 128)[1], lambda x: x.reshape(2, 16, 128)[1], id="index"),
        pytest.param((2, 8, 128), lambda r: r.reshape(16, 128)[3::4], lambda x: x.reshape(16, 128)[3::4], id="stride"),
        pytest.param((2, 8, 128), lambda r: r.at[1].reshape(4, 256)[...], lambda x: x[1].reshape(4, 256), id="at"),
        pytest.param((8, 128), lambda r: r.T[...], lambda x: x.T, id="transpose"),
        pytest.param(
            (2, 8, 128), lambda r: r.bitcast(jnp.int32)[...], lambda x: x.view(np.int32), id="bitcast-same-width"
        ),
    ],
)
def test_reads_through_transforms_equal_numpy(shape, read, expect):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = expect(x)

    def kernel(x_ref, o_ref):
        o_ref[...] = read(x_ref)

    np.testing.assert_array_equal(faithful(kernel, jnp.asarray(x), jax.ShapeDtypeStruct(want.shape, want.dtype)), want)


@pytest.mark.parametrize(
    ("source", "target", "rows"),
    [
        pytest.param(jnp.bfloat16, jnp.uint32, 16, id="bf16-to-u32"),
        pytest.param(jnp.uint32, jnp.bfloat16, 8, id="u32-to-bf16"),
        pytest.param(jnp.int8, jnp.uint32, 32, id="i8-to-u32"),
        pytest.param(jnp.uint32, jnp.int8, 8, id="u32-to-i8"),
        pytest.param(jnp.float32, jnp.int32, 8, id="same-width"),
    ],
)
def test_the_numpy_bitcast_equals_jaxs_ref_bitcast(served, source, target, rows):
    if not served.applied:
        pytest.skip("the installed interpreter serves bitcast refs itself; the fix's numpy bitcast is not installed")
    from jax._src.pallas.mosaic.interpret import utils
    from jax._src.state.utils import bitcast

    width = np.dtype(source).itemsize
    bits = np.random.default_rng(1).integers(0, 2**8, size=(2, rows, 128 * width), dtype=np.uint8)
    x = bits.view(np.dtype(source))
    np.testing.assert_array_equal(
        utils.bitcast(x, np.dtype(target)).view(np.uint8), np.asarray(bitcast(jnp.asarray(x), target)).view(np.uint8)
    )


def test_a_read_past_the_reshaped_value_raises():
    def kernel(x_ref, o_ref):
        # The third step reads rows 12 to 20 of 16.
        o_ref[...] = x_ref.reshape(16, 128)[pl.ds(pl.program_id(0) * 6, 8), :]

    x = jnp.zeros((2, 8, 128), jnp.float32)
    with pytest.raises(Exception, match="Out-of-bounds read of a transformed ref"):
        faithful(kernel, x, jax.ShapeDtypeStruct((8, 128), jnp.float32), grid=(3,))
    interpret.reset_tpu_interpreter()


def test_a_write_through_a_reshape_names_the_transform():
    def kernel(x_ref, o_ref):
        o_ref.reshape(16, 128)[...] = x_ref[...]

    with pytest.raises(Exception, match="ReshapeTransform is not supported here by the TPU interpreter"):
        faithful(kernel, jnp.zeros((16, 128), jnp.float32), jax.ShapeDtypeStruct((2, 8, 128), jnp.float32))
    interpret.reset_tpu_interpreter()


def test_a_masked_store_into_a_3d_ref_writes_the_masked_rows():
    from jax import lax
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
        pltpu.store(o_ref, x_ref[...], mask=lax.broadcasted_iota(jnp.int32, o_ref.shape, 0) < 5)

    x = np.random.default_rng(2).standard_normal((8, 2, 128)).astype(np.float32)
    got = faithful(kernel, jnp.asarray(x), jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_array_equal(got, np.where(np.arange(8)[:, None, None] < 5, x, 0))


# Ragged cases: (dtype, q_lens, kv_lens, (q heads, kv heads), page_size, kv pages per block, queries per block, kw)
RAGGED = [
    pytest.param(jnp.float32, (1, 2), (9, 16), (2, 1), 8, 1, 8, {}, id="decode-and-prefill"),
    pytest.param(jnp.float32, (1, 5, 16), (9, 16, 33), (4, 1), 8, 2, 8, {}, id="gqa-4-three-seqs"),
    pytest.param(jnp.bfloat16, (1, 5, 16), (9, 16, 33), (4, 2), 16, 2, 16, {}, id="bf16"),
    pytest.param(jnp.float32, (3, 0, 8), (20, 5, 8), (2, 2), 8, 3, 8, {}, id="an-empty-sequence"),
    pytest.param(
        jnp.float32, (3, 8), (20, 8), (4, 2), 8, 2, 8,
        {"sliding_window": 4, "soft_cap": 2.0, "k_scale": 4.0, "v_scale": 0.5}, id="window-cap-scales",
    ),
    pytest.param(
        jnp.bfloat16, (3, 8), (20, 8), (4, 2), 8, 2, 8,
        {"sliding_window": 4, "soft_cap": 2.0, "k_scale": 4.0, "v_scale": 0.5}, id="bf16-window-cap-scales",
    ),
]  # fmt: skip
# float32: kernel and reference sum in different orders (an online softmax in blocks, one softmax), so
# they differ by float32 rounding only.
F32_TOLERANCE = 4e-6
# bfloat16: the reference rounds the softmax probabilities p to bfloat16 before p @ v, the kernel keeps them in
# float32, so they may differ by sum_i |p_i - bf16(p_i)| |v_i| <= 2**-8 max|v| (sum_i p_i = 1), plus each
# side's rounding of its output to bfloat16 (2**-8 relative each).
BF16_STEP = 2.0**-8


def _assert_ragged_equals_reference(dtype, q_lens, kv_lens, heads, page, kv_block, q_block, kw, *, seed=3):
    rng = np.random.default_rng(seed)
    (q_heads, kv_heads), pages_per_seq = heads, -(-max(kv_lens) // page)
    pool = len(q_lens) * pages_per_seq + 1
    table = rng.permutation(pool)[: pool - 1].reshape(len(q_lens), pages_per_seq).astype(np.int32)
    args = (
        jnp.asarray(rng.standard_normal((sum(q_lens), q_heads, 128)), dtype),
        jnp.asarray(rng.standard_normal((pool, page, 2 * kv_heads, 128)), dtype),
        jnp.asarray(kv_lens, jnp.int32),
        jnp.asarray(table),
        jnp.asarray(np.cumsum((0, *q_lens)), jnp.int32),
        jnp.asarray([len(q_lens)], jnp.int32),
    )
    kw = {"sm_scale": 128**-0.5, **kw}
    with interpret.forced_interpret(), interpret.using_interpret_options(FAITHFUL), interpret.tpu_kernel_context():
        got = rpa.ragged_paged_attention(*args, num_kv_pages_per_block=kv_block, num_queries_per_block=q_block, **kw)
    want = rpa.ref_ragged_paged_attention(*args, **kw)
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    if dtype == jnp.float32:
        np.testing.assert_allclose(got, want, atol=F32_TOLERANCE, rtol=F32_TOLERANCE)
        return
    v_max = float(jnp.abs(args[1][:, :, 1::2].astype(jnp.float32)).max()) * kw.get("v_scale", 1.0)
    np.testing.assert_allclose(got, want, atol=BF16_STEP * v_max, rtol=2 * BF16_STEP)


@pytest.mark.parametrize(("dtype", "q_lens", "kv_lens", "heads", "page", "kv_block", "q_block", "kw"), RAGGED)
def test_ragged_paged_attention_equals_upstreams_reference(dtype, q_lens, kv_lens, heads, page, kv_block, q_block, kw):
    _assert_ragged_equals_reference(dtype, q_lens, kv_lens, heads, page, kv_block, q_block, kw)


@st.composite
def ragged_calls(draw):
    """Arguments of one ragged_paged_attention call: 1 to 3 sequences of 1 to 40 keys (kv_len 0 is
    docs/findings/pallas_ragged_paged_empty_sequence.md), each with 0 to kv_len queries."""
    kv_lens = draw(st.lists(st.integers(1, 40), min_size=1, max_size=3))
    q_lens = [draw(st.integers(0, kv)) for kv in kv_lens]
    q_lens[0] = max(q_lens[0], int(sum(q_lens) == 0))  # a query at least: an empty q is a zero-size pallas_call
    page = draw(st.sampled_from((8, 16)))
    kv_block = draw(st.integers(1, -(-max(kv_lens) // page)))  # "must be in range (0, pages_per_seq]"
    kw = {}
    if draw(st.booleans()):
        kw["sliding_window"] = draw(st.integers(1, 16))
    if draw(st.booleans()):
        kw["soft_cap"] = draw(st.sampled_from((1.0, 5.0)))
    return {
        "dtype": draw(st.sampled_from((jnp.float32, jnp.bfloat16))),
        "q_lens": tuple(q_lens),
        "kv_lens": tuple(kv_lens),
        "heads": draw(st.sampled_from(((2, 1), (4, 2), (2, 2)))),
        "page": page,
        "kv_block": kv_block,
        "q_block": draw(st.sampled_from((8, 16))),
        "kw": kw,
        "seed": draw(st.integers(0, 2**16)),
    }


# A handful: each call runs the whole kernel under the TPU interpret mode (seconds).
@settings(max_examples=4, deadline=None, database=None)
@given(ragged_calls())
def test_ragged_paged_attention_equals_upstreams_reference_on_drawn_calls(call):
    _assert_ragged_equals_reference(**call)


# Other Pallas TPU kernels, run before and after the fix in one fresh process (the jit caches cleared between).
_BITWISE = """
import hashlib, json, sys
import jax
import numpy as np
from harness.core import contract
from harness.runtime import interpret
from harness.core.inputs import make_inputs
from kernels import _tpu_interpret_fix as interpret_fix

def digests():
    out = {}
    with interpret.using_interpret_options(interpret.InterpretOptions(interpreter="faithful")):
        for name in ("pallas_flash", "pallas_paged"):
            kernel = contract.resolve(name)
            case = kernel.probe_case
            got = kernel.run(case, make_inputs(case), grads=kernel.capabilities.grads)
            arrays = [getattr(got, q) for q in ("out", "dq", "dk", "dv") if getattr(got, q) is not None]
            out[name] = [hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() for a in arrays]
    return out

before = digests()
status = interpret_fix.ensure()
jax.clear_caches()
print(json.dumps({"applied": status.applied, "before": before, "after": digests()}))
"""


def test_other_kernels_compute_the_same_bits_with_the_fix():
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-c", _BITWISE], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["applied"]:
        pytest.skip("the installed interpreter needs no fix: nothing patched to compare")
    assert result["before"] == result["after"]
    assert all(result["before"].values())


_SWITCHED = """
import json
from kernels import _tpu_interpret_fix as interpret_fix
status = interpret_fix.ensure()
print(json.dumps({"applied": status.applied, "before": status.before, "error": status.error}))
"""


@pytest.mark.parametrize(
    ("value", "says"),
    [
        pytest.param("off", "the fix is switched off (ATTN_HARNESS_TPU_INTERPRET_FIX=off)", id="off"),
        pytest.param("on", "'on' is not 'off'; unset it to apply", id="anything-else"),
    ],
)
def test_the_switch_leaves_the_interpreter_unpatched_and_says_so(value, says):
    # The unfixed side of the fix's proof (docs/findings/pallas_ragged_paged_interpreter.md, nox -s findings).
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path, interpret_fix.SWITCH: value}
    done = subprocess.run([sys.executable, "-c", _SWITCHED], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["before"] is None:
        pytest.skip("the installed interpreter needs no fix: the switch has nothing to leave out")
    assert not result["applied"]
    assert result["error"].startswith(result["before"]) and says in result["error"]
