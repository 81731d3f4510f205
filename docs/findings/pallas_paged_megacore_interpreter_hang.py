"""paged_attention's megacore modes under the Pallas TPU interpreter: they need a two-core interpreter.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_paged_megacore_interpreter_hang.py
Imports only jax, numpy and the standard library. Runs megacore_mode None, "batch" and "kv_head"
under `InterpretParams(num_cores_or_threads=2)` (each in seconds) and compares both megacore modes
with the default mode; then runs "batch" once with the default InterpretParams (one core) in a
child process with a time limit, which is where the kernel waits for a second core that never runs.
Exits 1 while the one-core call waits (the behaviour the note describes), 0 once it returns, and 2
when a megacore mode on two cores disagrees with the default mode (a new finding, not this one).
"""

import multiprocessing as mp
import sys
import time

ONE_CORE_LIMIT_S = 30  # the two-core calls take about 3 s each (measured at load 1.5)


def call(mode, cores):
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas.ops.tpu import paged_attention as pa

    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((2, 2, 64)), jnp.bfloat16)  # [batch, q_heads, head_dim]
    pages = jnp.asarray(rng.standard_normal((2, 5, 16, 64)), jnp.bfloat16)  # [kv_heads, pages, page_size, D]
    table = jnp.asarray([[3, 1], [0, 4]], jnp.int32)
    params = pltpu.InterpretParams() if cores is None else pltpu.InterpretParams(num_cores_or_threads=cores)
    with pltpu.force_tpu_interpret_mode(params):
        out = pa.paged_attention(
            q, pages, pages, jnp.asarray([20, 32], jnp.int32), table, pages_per_compute_block=1, megacore_mode=mode
        )
        return np.asarray(out.astype(jnp.float32))


if __name__ == "__main__":
    want = call(None, 2)
    ok = True
    for mode in ("batch", "kv_head"):
        start = time.perf_counter()
        got = call(mode, 2)
        diff = float(abs(got - want).max())
        ok &= diff == 0.0
        print(
            f"num_cores_or_threads=2 megacore_mode={mode!r}: returns in {time.perf_counter() - start:.1f} s, "
            f"max |out - megacore_mode=None| = {diff:.1e}"
        )
    p = mp.get_context("spawn").Process(target=call, args=("batch", None))
    p.start()
    p.join(ONE_CORE_LIMIT_S)
    waited = p.is_alive()
    if waited:
        p.kill()
        p.join()
    print(
        f"default InterpretParams (one core) megacore_mode='batch': "
        f"{f'no return within {ONE_CORE_LIMIT_S} s' if waited else 'returns'}"
    )
    sys.exit(2 if not ok else 1 if waited else 0)
