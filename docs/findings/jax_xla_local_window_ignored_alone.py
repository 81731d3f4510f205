"""jax.nn.dot_product_attention(implementation="xla") ignores local_window_size when it is the only mask.

Run: JAX_PLATFORMS=cpu python docs/findings/jax_xla_local_window_ignored_alone.py
(jax and numpy only; CPU, a second.) Compares the window given through `local_window_size` with the
same window given as a boolean `mask`; they must agree. Exits 1 while a window-only call differs from
the mask, 0 when every call agrees.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

print("jax", jax.__version__)
rng = np.random.default_rng(0)
q, k, v = (jnp.asarray(rng.standard_normal((1, 16, 1, 64)), jnp.float32) for _ in range(3))
idx = np.arange(16)
worst = 0.0
for left, right in ((0, 0), (1, 0), (2, 3), (15, 15)):
    dense = (idx[None, :] >= idx[:, None] - left) & (idx[None, :] <= idx[:, None] + right)
    want = jax.nn.dot_product_attention(q, k, v, mask=jnp.asarray(dense)[None, None], implementation="xla")
    got = jax.nn.dot_product_attention(q, k, v, local_window_size=(left, right), implementation="xla")
    # A window added to any other mask (here is_causal) is applied: only the window alone is lost.
    causal = dense & (idx[None, :] <= idx[:, None])
    want_c = jax.nn.dot_product_attention(q, k, v, mask=jnp.asarray(causal)[None, None], implementation="xla")
    got_c = jax.nn.dot_product_attention(q, k, v, is_causal=True, local_window_size=(left, right), implementation="xla")
    worst = max(worst, float(jnp.max(jnp.abs(got - want))))
    print(
        f"window {(left, right)!s:8}  alone: max |window - mask| {float(jnp.max(jnp.abs(got - want))):.1e}"
        f"   with is_causal: {float(jnp.max(jnp.abs(got_c - want_c))):.1e}"
    )
sys.exit(1 if worst > 1e-6 else 0)
