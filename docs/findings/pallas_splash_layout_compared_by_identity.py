"""Splash attention: dk and dv are zero when BlockSizes' layouts are the plain ints of QKVLayout.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_splash_layout_compared_by_identity.py
(jax and numpy only; natively on a TPU, else under the Pallas TPU interpreter, seconds on CPU.) Exits 1
while layout 1 and QKVLayout.HEAD_DIM_MINOR give different gradients, 0 when they agree.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

L, D = 256, 64
mask = mask_lib.MultiHeadMask([mask_lib.CausalMask((L, L))])
interpret = jax.default_backend() != "tpu"
rng = np.random.default_rng(0)
q, k, v = (jnp.asarray(rng.standard_normal((1, L, D)), jnp.float32) for _ in range(3))


def grads(layout):
    """dq, dk, dv of sum(out) with every layout set to `layout`."""
    sizes = splash.BlockSizes(
        block_q=128,
        block_kv=128,
        block_kv_compute=128,
        block_q_dkv=128,
        block_kv_dkv=128,
        block_kv_dkv_compute=128,
        block_q_dq=128,
        block_kv_dq=128,
        q_layout=layout,
        k_layout=layout,
        v_layout=layout,
    )
    kernel = splash.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)
    return jax.grad(lambda q, k, v: kernel(q, k, v).sum(), argnums=(0, 1, 2))(q, k, v)


# The int first: BlockSizes(k_layout=1) == BlockSizes(k_layout=QKVLayout.HEAD_DIM_MINOR) and they
# hash alike, so the jitted kernel traced for one serves the other; clear the cache between them.
as_int = grads(int(splash.QKVLayout.HEAD_DIM_MINOR))
jax.clear_caches()
as_enum = grads(splash.QKVLayout.HEAD_DIM_MINOR)
for name, a, b in zip(("dq", "dk", "dv"), as_int, as_enum, strict=True):
    print(
        f"{name}: max|{name}| {float(jnp.abs(b).max()):.3g}, layout 1 vs QKVLayout.HEAD_DIM_MINOR differ by "
        f"{float(jnp.abs(a - b).max()):.3g}; all zero with layout 1: {bool((a == 0).all())}"
    )
sys.exit(1 if any(float(jnp.abs(a - b).max()) > 0 for a, b in zip(as_int, as_enum, strict=True)) else 0)
