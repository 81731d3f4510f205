"""ragged_paged_attention cannot run under the Pallas TPU interpreter (CPU): an internal error.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_ragged_paged_interpreter.py
Imports only jax and numpy. Prints the interpreter's error and exits 1, or prints the
largest difference from upstream's own reference and exits 0 where the kernel runs.
"""

import sys

import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa

rng = np.random.default_rng(0)
num_seqs, q_heads, kv_heads, head_dim, page_size, pages_per_seq = 2, 2, 1, 128, 8, 2
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
except Exception as e:  # noqa: BLE001 - the error is the finding
    print(f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}")
    sys.exit(1)
want = rpa.ref_ragged_paged_attention(*args, sm_scale=kw["sm_scale"])
print("runs; max |kernel - reference| =", float(jnp.max(jnp.abs(got - want))))
