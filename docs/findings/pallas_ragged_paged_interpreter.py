"""The Pallas TPU interpreter cannot read a reshaped ref, and calls a masked store into a 3-D ref out of bounds;
so ragged_paged_attention cannot run under it.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_ragged_paged_interpreter.py [--fixed]
Imports only jax, numpy and the standard library; seconds. Three kernels under the TPU interpret mode:
one that reads its input through `x_ref.reshape(...)`, one that stores its input into a [8, 2, 128] ref
under a mask, and ragged_paged_attention, which does both (its K/V pages, its accumulator). Exits 1 while the
interpreter fails either of the first two, 0 once it serves both (the ragged kernel's largest difference from
upstream's reference is printed either way it runs).

--fixed (from the repository root) first applies the harness's fix, kernels/_tpu_interpret_fix.py, to the
installed interpreter: the same three kernels then run, and the script exits 0.

Then, for the record and whatever the exit code, the HLO ("fast") interpreter (pallas_call(interpret=True), which
the fix does not touch) on a masked store into `o_ref.at[1]` and on ragged_paged_attention, which stores so; and
last, the TPU interpret mode's verdict in one line.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa

if "--fixed" in sys.argv[1:]:
    sys.path.insert(0, ".")
    from kernels import _tpu_interpret_fix

    print("fix:", _tpu_interpret_fix.ensure())


def last_line(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}"


def interpreted(kernel, x, out_shape):
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out_shape, jnp.float32))(x)


# 1. Read a (2, 8, 128) input as (16, 128) inside a kernel.
def reshaped_read(x_ref, o_ref):
    o_ref[...] = x_ref.reshape(16, 128)[...]


# 2. Store an (8, 2, 128) input into the output's first 5 rows, under a mask.
def masked_store(x_ref, o_ref):
    o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
    pltpu.store(o_ref, x_ref[...], mask=lax.broadcasted_iota(jnp.int32, o_ref.shape, 0) < 5)


x = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)
x3 = x.reshape(8, 2, 128)
shown = None  # the TPU interpret mode's first error
for name, kernel, arg, want in [
    ("reshaped ref read", reshaped_read, x, x.reshape(16, 128)),
    ("masked store into a 3-D ref", masked_store, x3, jnp.where(jnp.arange(8)[:, None, None] < 5, x3, 0)),
]:
    try:
        out = interpreted(kernel, arg, want.shape)
        print(f"{name}: ok, equal to numpy's: {bool((out == want).all())}")
    except Exception as e:  # noqa: BLE001 - the error is the finding
        pltpu.reset_tpu_interpret_mode_state()
        print(f"{name}: {last_line(e)}")
        shown = shown or f"{name}: {last_line(e)}"

rng = np.random.default_rng(0)
num_seqs, q_heads, kv_heads, head_dim, page_size = 2, 4, 2, 128, 8
q_lens, kv_lens = [1, 2], [9, 16]
q = jnp.asarray(rng.standard_normal((sum(q_lens), q_heads, head_dim)), jnp.float32)
# [pages, page_size, 2 * kv_heads (k and v interleaved), head_dim]
kv_pages = jnp.asarray(rng.standard_normal((5, page_size, 2 * kv_heads, head_dim)), jnp.float32)
args = (
    q,
    kv_pages,
    jnp.asarray(kv_lens, jnp.int32),
    jnp.asarray([[3, 1], [0, 4]], jnp.int32),  # page table: a permutation of the pool
    jnp.asarray(np.cumsum([0, *q_lens]), jnp.int32),
    jnp.asarray([num_seqs], jnp.int32),
)
kw = {"sm_scale": head_dim**-0.5, "num_kv_pages_per_block": 1, "num_queries_per_block": 8}
try:
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
        got = rpa.ragged_paged_attention(*args, **kw)
    want = rpa.ref_ragged_paged_attention(*args, sm_scale=kw["sm_scale"])
    print("ragged_paged_attention: runs; max |kernel - reference| =", float(jnp.max(jnp.abs(got - want))))
except Exception as e:  # noqa: BLE001 - the error is the finding
    print(f"ragged_paged_attention: {last_line(e)}")


# 3. The HLO interpreter: a masked store into the rows of o_ref.at[1] (a Python-int index).
def masked_store_at(x_ref, o_ref):
    o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
    row = o_ref.at[1]
    pltpu.store(row, x_ref[1], mask=lax.broadcasted_iota(jnp.int32, row.shape, 0) < 5)


for name, call in [
    ("masked store into o_ref.at[1]", lambda: pl.pallas_call(masked_store_at, out_shape=x)(x)),
    ("ragged_paged_attention", lambda: rpa.ragged_paged_attention(*args, **kw)),
]:
    try:
        with pltpu.force_tpu_interpret_mode(True):  # True, not InterpretParams: the HLO interpreter
            jax.block_until_ready(call())
        print(f"HLO interpreter, {name}: runs")
    except Exception as e:  # noqa: BLE001 - recorded, not the exit code: the fix serves the TPU interpret mode
        print(f"HLO interpreter, {name}: {last_line(e)}")
# Last, the line `python -m harness findings` shows: the TPU interpret mode's verdict.
print(f"TPU interpret mode fails: {shown}" if shown else "TPU interpret mode: serves both")
sys.exit(1 if shown else 0)
