"""Splash attention: padded query rows make every dk/dv entry NaN when block_q_dkv > block_q.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_splash_backward_nan_larger_dkv_tile.py
(jax and numpy only; natively on a TPU, else under the Pallas TPU interpreter, seconds on CPU.)
Cross-attention from 256 query rows, of which rows 100..255 are padding (a padding mask: they
see no key), to 128 keys; the loss sums only the 100 real rows. Exits 1 while some gradient is non-finite with
block_q_dkv=256 > block_q=128, 0 when every gradient is finite.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

Q_LEN, KV_LEN, VALID, D = 256, 128, 100, 64
dense = np.broadcast_to(np.arange(Q_LEN)[:, None] < VALID, (Q_LEN, KV_LEN))  # padded query rows see no key
mask = mask_lib.MultiHeadMask([mask_lib.NumpyMask(dense)])
interpret = jax.default_backend() != "tpu"
rng = np.random.default_rng(0)
q, k, v = (jnp.asarray(rng.standard_normal((1, n, D)), jnp.float32) for n in (Q_LEN, KV_LEN, KV_LEN))


def grads(block_q_dkv: int, block_q_dq: int | None = 128, sinks: bool = False):
    """dq, dk, dv with the forward's block_q = 128; block_q_dq=None is the fused backward (dq in the dkv kernel)."""
    dq_blocks = {"use_fused_bwd_kernel": True} if block_q_dq is None else {"block_q_dq": block_q_dq, "block_kv_dq": 128}
    sizes = splash.BlockSizes(
        block_q=128,
        block_kv=128,
        block_kv_compute=128,
        block_q_dkv=block_q_dkv,
        block_kv_dkv=128,
        block_kv_dkv_compute=128,
        **dq_blocks,
    )
    kernel = splash.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)
    extra = {"sinks": jnp.ones((1,), jnp.float32)} if sinks else {}
    # The loss reads only the real rows: the gradient is well defined whatever the padded rows hold.
    return jax.grad(lambda q, k, v: kernel(q, k, v, **extra)[:, :VALID].sum(), argnums=(0, 1, 2))(q, k, v)


def nonfinite(a) -> int:
    return int((~jnp.isfinite(a)).sum())


shown = False
for label, kw in (
    ("block_q_dkv=128", {"block_q_dkv": 128}),
    ("block_q_dkv=256", {"block_q_dkv": 256}),
    ("block_q_dq=256", {"block_q_dkv": 128, "block_q_dq": 256}),
    ("fused, block_q_dkv=256", {"block_q_dkv": 256, "block_q_dq": None}),
    ("block_q_dkv=256, block_q_dq=256, sinks", {"block_q_dkv": 256, "block_q_dq": 256, "sinks": True}),
):
    dq, dk, dv = grads(**kw)
    bad = np.flatnonzero(~np.isfinite(np.asarray(dq[0])).all(-1))
    where = f" (rows {bad.min()}..{bad.max()})" if bad.size else ""
    shown |= "256" in label and "sinks" not in label and nonfinite(dk) + nonfinite(dq) > 0
    print(f"{label}: non-finite dq {nonfinite(dq)}{where}, dk {nonfinite(dk)}, dv {nonfinite(dv)} (of {dk.size})")
sys.exit(1 if shown else 0)
