"""Splash attention: NaN dk/dv when the dkv kernel's query tile is larger than the forward's and some
query rows see no key.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_splash_backward_nan_larger_dkv_tile.py
(jax and numpy only; natively on a TPU, else under the Pallas TPU interpreter, about a minute on CPU.)
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

Q_LEN, KV_LEN, D = 256, 128, 64
# Causal with offset -130: query i sees keys j <= i - 130, so queries 0..129 see no key at all.
mask = mask_lib.MultiHeadMask([mask_lib.CausalMask((Q_LEN, KV_LEN), offset=-130)])
interpret = jax.default_backend() != "tpu"


def grads(block_q_dkv: int):
    sizes = splash.BlockSizes(
        block_q=128, block_kv=128, block_kv_compute=128,
        block_q_dkv=block_q_dkv, block_kv_dkv=128, block_kv_dkv_compute=128,
        block_q_dq=128, block_kv_dq=128,
    )
    kernel = splash.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal((1, n, D)), jnp.float32) for n in (Q_LEN, KV_LEN, KV_LEN))

    def loss(q, k, v):
        # Only rows that see a key: the gradient is well defined whatever the empty rows hold.
        return kernel(q, k, v)[:, 130:].sum()

    return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)


for tile in (128, 256):
    dq, dk, dv = grads(tile)
    print(f"block_q_dkv={tile}: non-finite dq {int((~jnp.isfinite(dq)).sum())}, "
          f"dk {int((~jnp.isfinite(dk)).sum())}, dv {int((~jnp.isfinite(dv)).sum())} (of {dk.size})")
