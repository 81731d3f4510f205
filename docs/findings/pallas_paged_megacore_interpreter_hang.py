"""paged_attention with megacore_mode="batch" or "kv_head" never returns under the Pallas TPU interpreter.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_paged_megacore_interpreter_hang.py
Imports only jax and numpy. Each mode runs in a child process with a 60 s limit (the same
call with megacore_mode=None takes a few seconds); prints which modes return.
"""

import multiprocessing as mp
import sys

LIMIT_S = 60


def call(mode):
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas.ops.tpu import paged_attention as pa

    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((2, 2, 64)), jnp.bfloat16)
    pages = jnp.asarray(rng.standard_normal((2, 5, 16, 64)), jnp.bfloat16)
    table = jnp.asarray([[3, 1], [0, 4]], jnp.int32)
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
        out = pa.paged_attention(
            q, pages, pages, jnp.asarray([20, 32], jnp.int32), table, pages_per_compute_block=1, megacore_mode=mode
        )
        out.block_until_ready()


if __name__ == "__main__":
    hung = []
    for mode in (None, "batch", "kv_head"):
        p = mp.get_context("spawn").Process(target=call, args=(mode,))
        p.start()
        p.join(LIMIT_S)
        if p.is_alive():
            p.kill()
            hung.append(mode)
        print(f"megacore_mode={mode!r}: {'no return within %d s' % LIMIT_S if mode in hung else 'returns'}")
    sys.exit(1 if hung else 0)
