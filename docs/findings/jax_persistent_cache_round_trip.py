"""jaxlib 0.5.3: a program served back from JAX's persistent compilation cache computes other values.

Run: JAX_PLATFORMS=cpu python docs/findings/jax_persistent_cache_round_trip.py
(jax and numpy only; CPU, a few seconds.) Compiles one small program with the persistent cache on, in
a fresh cache directory: a loop over row tiles, inside it a loop whose trip count is computed from the
outer index (a causal flash-attention forward's shape), a running max and log-sum-exp. The first call
compiles it and writes it to the cache; after jax.clear_caches() the second call is served from the
cache. Exits 1 while the two differ, 0 when they are the same bits.
"""

import sys
import tempfile

import jax

with tempfile.TemporaryDirectory() as cache:
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    x = jnp.arange(64 * 64, dtype=jnp.float32).reshape(64, 64) % 7 - 3

    @jax.jit
    def f(x):
        def row(j, out):
            def step(i, carry):
                m, total = carry
                tile = lax.dynamic_slice(x, (j * 16, i * 16), (16, 16))
                new = jnp.maximum(m, tile.max(-1))
                return new, total * jnp.exp(m - new) + jnp.exp(tile - new[:, None]).sum(-1)

            start = (jnp.full((16,), -0.7 * 3.4e38, jnp.float32), jnp.zeros((16,), jnp.float32))
            m, total = lax.fori_loop(0, lax.div(16 * (j + 1) + 15, 16), step, start)
            return lax.dynamic_update_slice(out, (m + jnp.log(total))[:, None] * jnp.ones((1, 64)), (j * 16, 0))

        return lax.fori_loop(0, 4, row, jnp.zeros_like(x))

    compiled = np.asarray(f(x))
    jax.clear_caches()
    served = np.asarray(f(x))

print("jax", jax.__version__)
print(f"compiled: sum |f| {np.abs(compiled).sum():.6g}, finite {np.isfinite(compiled).all()}")
print(f"served from the cache: sum |f| {np.abs(served).sum():.6g}, finite {np.isfinite(served).all()}")
sys.exit(0 if compiled.tobytes() == served.tobytes() else 1)
