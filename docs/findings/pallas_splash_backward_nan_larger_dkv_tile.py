"""Splash attention: NaN dk/dv (and dq) when a backward query tile is larger than the forward's and some
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


def grads(block_q_dkv: int, block_q_dq: int | None = 128, sinks: bool = False):
    """dq, dk, dv with the forward's block_q = 128; block_q_dq=None is the fused backward (dq in the dkv kernel)."""
    dq_blocks = {"use_fused_bwd_kernel": True} if block_q_dq is None else {"block_q_dq": block_q_dq, "block_kv_dq": 128}
    sizes = splash.BlockSizes(
        block_q=128, block_kv=128, block_kv_compute=128,
        block_q_dkv=block_q_dkv, block_kv_dkv=128, block_kv_dkv_compute=128, **dq_blocks,
    )
    kernel = splash.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal((1, n, D)), jnp.float32) for n in (Q_LEN, KV_LEN, KV_LEN))
    extra = {"sinks": jnp.ones((1,), jnp.float32)} if sinks else {}

    def loss(q, k, v):
        # Only rows that see a key: the gradient is well defined whatever the empty rows hold.
        return kernel(q, k, v, **extra)[:, 130:].sum()

    return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)


def nonfinite(a) -> int:
    return int((~jnp.isfinite(a)).sum())


for label, kw in (
    ("block_q_dkv=128", {"block_q_dkv": 128}),
    ("block_q_dkv=256", {"block_q_dkv": 256}),
    ("block_q_dq=256", {"block_q_dkv": 128, "block_q_dq": 256}),
    ("fused, block_q_dkv=256", {"block_q_dkv": 256, "block_q_dq": None}),
    ("block_q_dkv=256, block_q_dq=256, sinks", {"block_q_dkv": 256, "block_q_dq": 256, "sinks": True}),
):
    dq, dk, dv = grads(**kw)
    rows = np.flatnonzero(~np.isfinite(np.asarray(dq[0])).all(-1))
    where = f" (rows {rows.min()}..{rows.max()})" if rows.size else ""
    print(f"{label}: non-finite dq {nonfinite(dq)}{where}, dk {nonfinite(dk)}, dv {nonfinite(dv)} (of {dk.size})")
