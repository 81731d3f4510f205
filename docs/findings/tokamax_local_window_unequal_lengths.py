"""tokamax.dot_product_attention(local_window_size=...) with q_len != kv_len: errors, or a silent pass.

Run: JAX_PLATFORMS=cpu python docs/findings/tokamax_local_window_unequal_lengths.py
Imports jax, numpy and tokamax. For each (q_len, kv_len) and implementation, prints the largest
difference from jax.nn.dot_product_attention with the same local_window_size, or the error.
Exits 1 when any unequal-length call fails or differs from jax.nn by more than AGREE, 0 when all agree
(tokamax 0.0.17 on: it builds the window as a CausalMask).
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
# float32 rounding of the same window computed two ways (2e-7 to 4e-7 measured); a wrong window moves
# outputs by their own size (about 1).
AGREE = 1e-5

rng = np.random.default_rng(0)
failed = False
for q_len, kv_len in [(64, 64), (64, 128), (128, 64), (1, 128)]:
    q = jnp.asarray(rng.standard_normal((1, q_len, 2, 32)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((1, kv_len, 2, 32)), jnp.float32)
    v = jnp.asarray(rng.standard_normal((1, kv_len, 2, 32)), jnp.float32)
    want = jax.nn.dot_product_attention(q, k, v, local_window_size=(3, 2))
    for impl in ("xla", "xla_chunked"):
        try:
            got = tokamax.dot_product_attention(q, k, v, local_window_size=(3, 2), implementation=impl)
            error = float(jnp.abs(got - want).max())
            failed |= q_len != kv_len and not error <= AGREE
            print(f"{q_len=:4} {kv_len=:4} {impl:12} max |tokamax - jax.nn| = {error:.2e}")
        except Exception as e:  # noqa: BLE001 - the error is the finding
            failed |= q_len != kv_len
            print(f"{q_len=:4} {kv_len=:4} {impl:12} {type(e).__name__}: {str(e).splitlines()[0][:110]}")
sys.exit(1 if failed else 0)
