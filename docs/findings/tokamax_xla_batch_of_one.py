"""tokamax's XLA implementations: a batch row computed alone differs by an ulp from the same row in a batch.

Run: JAX_PLATFORMS=cpu python docs/findings/tokamax_xla_batch_of_one.py
Imports jax, numpy and tokamax; seconds. Three float32 rows (L=16, D=32, 2 query heads on 1 and on 2 key/value
heads, seed 0); forward and backward of tokamax.dot_product_attention(implementation="xla" and "xla_chunked"),
then of jax.nn.dot_product_attention for comparison. For row 1 it prints the largest difference in out, dq, dk
and dv between a batch of 2 and a batch of 3 (other programs, both vmapped over the batch by tokamax), and
between a batch of 2 and the row alone (a batch of one, which tokamax computes unbatched). Exits 1 while a
tokamax row alone differs from the same row in a batch, 0 once it is the same bits, 4 without tokamax.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

try:
    import tokamax
    from absl import flags
except ImportError as e:  # tokamax installs on jax >= 0.9.2 only
    print(f"cannot run here: {e}")
    sys.exit(4)

flags.FLAGS.mark_as_parsed()  # tokamax reads absl flags; this script has none

QUANTITIES = ("out", "dq", "dk", "dv")


def gradients(attention):
    @jax.jit
    def run(q, k, v, dout):
        out, pullback = jax.vjp(attention, q, k, v)
        return (out, *pullback(dout))

    return run


def row_1(a, b, i):
    """Largest difference per quantity between row 1 of results `a` and row i of results `b`."""
    return " ".join(
        f"{name} {float(jnp.abs(x[1] - y[i]).max()):.1e}" for name, x, y in zip(QUANTITIES, a, b, strict=True)
    )


CALLS = {
    "tokamax xla": lambda q, k, v: tokamax.dot_product_attention(q, k, v, implementation="xla"),
    "tokamax xla_chunked": lambda q, k, v: tokamax.dot_product_attention(q, k, v, implementation="xla_chunked"),
    "jax.nn (xla)": lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="xla"),
}
shown = False
for kv_heads in (1, 2):
    rng = np.random.default_rng(0)
    q, dout = (jnp.asarray(rng.standard_normal((3, 16, 2, 32)), jnp.float32) for _ in range(2))
    k, v = (jnp.asarray(rng.standard_normal((3, 16, kv_heads, 32)), jnp.float32) for _ in range(2))
    for name, attention in CALLS.items():
        run = gradients(attention)
        two, three, alone = (
            run(q[:2], k[:2], v[:2], dout[:2]),
            run(q, k, v, dout),
            run(q[1:2], k[1:2], v[1:2], dout[1:2]),
        )
        print(f"{name}, 2 query heads on {kv_heads}: row 1, batch of 2 vs 3: {row_1(two, three, 1)}")
        print(f"{name}, 2 query heads on {kv_heads}: row 1, batch of 2 vs alone: {row_1(two, alone, 0)}")
        differs = any(bool((x[1] != y[0]).any()) for x, y in zip(two, alone, strict=True))
        shown |= name.startswith("tokamax") and differs
sys.exit(1 if shown else 0)
