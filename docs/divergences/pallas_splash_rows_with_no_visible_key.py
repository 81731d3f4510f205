"""Splash attention on query rows that see no key: NaN in a tile that visits no key, an average elsewhere.

Run: JAX_PLATFORMS=cpu python docs/divergences/pallas_splash_rows_with_no_visible_key.py
(jax and numpy only; natively on a TPU, else under the Pallas TPU interpreter, seconds on CPU.)
256 query rows, 128 keys, 128-row query tiles; rows 100..255 see no key. Rows 100..127 share a tile
with rows that see keys, rows 128..255 fill a tile of their own. Exits 1 while the two kinds of
empty row get different values (NaN in the unvisited tile), 0 when every empty row is alike.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

Q_LEN, KV_LEN, VALID, D = 256, 128, 100, 64
dense = np.broadcast_to(np.arange(Q_LEN)[:, None] < VALID, (Q_LEN, KV_LEN))
kernel = splash.make_splash_mha(
    mask_lib.MultiHeadMask([mask_lib.NumpyMask(dense)]),
    block_sizes=splash.BlockSizes(block_q=128, block_kv=128, block_kv_compute=128),
    head_shards=1,
    q_seq_shards=1,
    interpret=jax.default_backend() != "tpu",
)
rng = np.random.default_rng(0)
q, k, v = (jnp.asarray(rng.standard_normal((1, n, D)), jnp.float32) for n in (Q_LEN, KV_LEN, KV_LEN))
out = np.asarray(kernel(q, k, v))[0]
mean_v = np.asarray(v[0]).mean(0)
shared, alone = out[VALID:128], out[128:]
print(
    f"rows {VALID}..127 (tile visits keys): NaN rows {int(np.isnan(shared).any(-1).sum())}, "
    f"max |row - mean of v| {float(np.nanmax(np.abs(shared - mean_v))):.1e}"
)
print(f"rows 128..255 (tile visits no key):  NaN rows {int(np.isnan(alone).any(-1).sum())}")
sys.exit(1 if np.isnan(alone).any() != np.isnan(shared).any() else 0)
