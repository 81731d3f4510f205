"""tokamax's Mosaic TPU attention: with grouped query heads and a boolean mask, dk and dv keep the last head's share
where the dkv pass visits one key tile.

Run: JAX_PLATFORMS=cpu python docs/findings/tokamax_mosaic_gqa_mask_one_kv_tile.py
Imports jax, numpy and tokamax; about a minute. Under the TPU interpret mode (the faithful Pallas interpreter,
which models a TPU's pipeline: a block whose index does not change between two grid steps is not copied in
again). First the whole mechanism on a kernel of one line: a grid of (2, 1) over one block, o = x + 1 with x
aliased to o: the second step reads x as it was, so 1, not 2. Then tokamax's dkv kernel, which accumulates
dk and dv over the query heads of a group the same way ("in/out aliasing to accumulate within kv groups",
splash_attention_kernel.py): 2 query heads on 1 key/value head, a band as the boolean mask, on 128 keys (one
128-key dkv tile: the block index never changes) and 256 keys (two), dk and dv against tokamax's XLA
implementation. Exits 1 while the one-tile gradients are wrong, 0 once they agree, 4 without tokamax.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

FAITHFUL = pltpu.InterpretParams()


def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def revisit(x):
    spec = pl.BlockSpec((8, 128), lambda h, j: (j, 0))
    return pl.pallas_call(
        add_one,
        grid=(2, 1),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={0: 0},
    )(x)


with pltpu.force_tpu_interpret_mode(FAITHFUL):
    got = np.asarray(jax.jit(revisit)(jnp.zeros((8, 128), jnp.float32)))
print(f"one block visited on two consecutive steps, o = x + 1 aliased: {sorted(set(got.ravel().tolist()))}")

try:
    import tokamax
    from absl import flags
    from jax._src import callback, effects
    from tokamax._src.ops.attention import pallas_mosaic_tpu, pallas_mosaic_tpu_vjp
except ImportError as e:  # tokamax installs on jax >= 0.9.2 only
    print(f"cannot run here: {e}")
    sys.exit(4)

flags.FLAGS.mark_as_parsed()  # tokamax reads absl flags; this script has none
# The device gate (a TPU v5 or later) of the op and its VJP op, and the interpret mode's callbacks in
# custom_vjp's remat optimization (docs/findings/tokamax_mosaic_faithful_interpreter.md); batch 1.
for op in (pallas_mosaic_tpu.PallasMosaicTpuFlashAttention, pallas_mosaic_tpu_vjp.PallasMosaicTpuFlashAttentionVjp):
    op.supported_on = lambda self, device: True
effects.custom_derivatives_allowed_effects.add_type(callback.IOEffect)
effects.custom_derivatives_allowed_effects.add_type(callback.OrderedIOEffect)

shown = False
for length in (128, 256):
    keys = jax.random.split(jax.random.key(0), 4)
    q, dout = (jax.random.normal(key, (1, length, 2, 128), jnp.float32) for key in keys[:2])
    k, v = (jax.random.normal(key, (1, length, 1, 128), jnp.float32) for key in keys[2:])
    mask = jnp.asarray(np.abs(np.arange(length)[:, None] - np.arange(length)[None]) <= 3)

    def grads(implementation, q=q, k=k, v=v, dout=dout, mask=mask):
        def attention(q, k, v):
            return tokamax.dot_product_attention(q, k, v, None, mask, implementation=implementation)

        _, vjp = jax.vjp(attention, q, k, v)
        return [np.asarray(g) for g in vjp(dout)]

    want = grads("xla")
    with pltpu.force_tpu_interpret_mode(FAITHFUL):
        got = grads("mosaic")
    errors = [float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True)]
    print(
        f"tokamax mosaic, 2 query heads on 1 kv head, band mask, {length} keys ({length // 128} dkv tile(s)): "
        f"max |d - xla| dq {errors[0]:.2e}, dk {errors[1]:.2e}, dv {errors[2]:.2e}"
    )
    if length == 128:
        shown = max(errors[1:]) > 1e-3

sys.exit(1 if shown else 0)
