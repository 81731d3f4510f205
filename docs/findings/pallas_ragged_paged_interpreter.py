"""The Pallas TPU interpreter cannot read a reshaped ref; so ragged_paged_attention cannot run under it.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_ragged_paged_interpreter.py
Imports only jax, numpy and the standard library; seconds. First the whole repro, a kernel that
reads its input through `x_ref.reshape(...)`; then ragged_paged_attention, which reads its combined
K/V pages the same way. Exits 1 while the interpreter rejects the reshaped read, 0 once it serves it
(and then prints the kernel's largest difference from upstream's reference).
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa


def last_line(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}"


# The feature request, whole: read a (2, 8, 128) input as (16, 128) inside a kernel.
def kernel(x_ref, o_ref):
    o_ref[...] = x_ref.reshape(16, 128)[...]


x = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)
try:
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
        out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)
    print("reshaped ref read: ok, equal to x.reshape(16, 128):", bool((out == x.reshape(16, 128)).all()))
    shown = False
except Exception as e:  # noqa: BLE001 - the error is the finding
    print(f"reshaped ref read: {last_line(e)}")
    shown = True

rng = np.random.default_rng(0)
num_seqs, q_heads, kv_heads, head_dim, page_size = 2, 2, 1, 128, 8
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
sys.exit(1 if shown else 0)
