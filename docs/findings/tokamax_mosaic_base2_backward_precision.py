"""tokamax's Mosaic TPU attention: with use_base2_exp (its default) the backward loses float32 precision on rows
whose logits lie far from zero.

Run: JAX_PLATFORMS=cpu python docs/findings/tokamax_mosaic_base2_backward_precision.py
Imports jax, numpy and tokamax; about a minute (the Pallas HLO interpreter). The harness's "dominant" regime:
one key 2**17 above the others for every query (exact in float32), float32: dv from the op with the heuristic config
(use_base2_exp on both passes), with base-2 exponentials in the forward only, and with natural ones in both,
against float64. The VJP recomputes p = exp2(s * log2(e) - logsumexp * log2(e)) from the forward's natural-log
logsumexp scaled outside the kernel (pallas_mosaic_tpu_vjp.py: `lse = lse * splash.LOG2E`), so p carries the
rounding of two float32 products near 1.9e5 (ulp 2**-6). Natural exponentials subtract the exact logit and
logsumexp, 2**17. Exits 1 while the base-2 dv error is
100 times the natural one's or more, 0 once it is not, 4 without tokamax.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu

try:
    import tokamax  # noqa: F401 - the installed release under test
    from absl import flags
    from tokamax._src.ops.attention import base
    from tokamax._src.ops.attention import pallas_mosaic_tpu as mosaic
    from tokamax._src.ops.attention import pallas_mosaic_tpu_vjp as mosaic_vjp
    from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_kernel as splash
except ImportError as e:  # tokamax installs on jax >= 0.9.2 only
    print(f"cannot run here: {e}")
    sys.exit(4)

flags.FLAGS.mark_as_parsed()  # tokamax reads absl flags; this script has none
for op in (mosaic.PallasMosaicTpuFlashAttention, mosaic_vjp.PallasMosaicTpuFlashAttentionVjp):
    op.supported_on = lambda self, device: True  # the device gate: a TPU v5 or later

L, D = 128, 128
rng = np.random.default_rng(0)
q = (np.rint(rng.standard_normal((L, D)) * 8) / 8).astype(np.float32)  # on a grid: exact products
k = (np.rint(rng.standard_normal((L, D)) * 8) / 8).astype(np.float32)
q[:, 0], k[:, 0] = 2.0**9, 0.0
k[37, 0] = 2.0**8  # key 37 is 2**17 above the rest in every row
v = rng.standard_normal((L, D)).astype(np.float32)
dout = rng.standard_normal((L, D)).astype(np.float32)


def dv_truth():
    s = q.astype(np.float64) @ k.T.astype(np.float64)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p.T @ dout.astype(np.float64)


def dv_of(fwd_base2: bool, bwd_base2: bool):
    config = mosaic.Config(
        block_q=128,
        block_kv=128,
        block_kv_compute=128,
        q_layout=splash.QKVLayout.HEAD_DIM_MINOR,
        k_layout=splash.QKVLayout.HEAD_DIM_MINOR,
        v_layout=splash.QKVLayout.HEAD_DIM_MINOR,
        use_experimental_scheduler=True,
        use_base2_exp=fwd_base2,
    )
    vjp_config = mosaic_vjp.Config(block_q_dkv=128, block_kv_dkv=128, block_kv_dkv_compute=128, use_base2_exp=bwd_base2)
    op = mosaic.PallasMosaicTpuFlashAttention(
        config=config, vjp=mosaic_vjp.PallasMosaicTpuFlashAttentionVjp(config=vjp_config)
    )

    def attention(q, k, v):
        return op(q, k, v, mask=base.Mask(), logits_scale=1.0)

    args = [jnp.asarray(a)[None, :, None, :] for a in (q, k, v)]
    with pltpu.force_tpu_interpret_mode(True):  # the HLO interpreter: no host callbacks
        _, vjp = jax.vjp(attention, *args)
        return np.asarray(vjp(jnp.asarray(dout)[None, :, None, :])[2])[0, :, 0, :]


want = dv_truth()
errors = {}
for label, fwd, bwd in (
    ("base 2 both (default)", True, True),
    ("base 2 forward only", True, False),
    ("natural both", False, False),
):
    errors[label] = float(np.abs(dv_of(fwd, bwd) - want).max())
    print(f"dv max |err| against float64, {label}: {errors[label]:.3e}  (max |dv| {np.abs(want).max():.2f})")
shown = errors["base 2 both (default)"] >= 100 * max(errors["natural both"], 1e-7)
sys.exit(1 if shown else 0)
