"""The Pallas HLO interpreter (interpret=True) reads an input aliased to an output as it was before the kernel ran.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_hlo_interpreter_aliased_revisit.py
Imports jax, numpy and (for the second check) tokamax; about a minute. First the whole repro: a grid of
(2, 2) over two blocks, block index j, each step writing o = x + 1 with x aliased to o (input_output_aliases)
and the same block visited twice with another block between. A TPU writes the first visit back before the
second reads it, and so does the TPU interpret mode: 2. The HLO interpreter gives 1. Then tokamax's Mosaic
TPU attention, whose dkv kernel accumulates dk and dv over the query heads of a group through such an alias
(a boolean mask, q_heads > kv_heads), on 256 keys (two 128-key dkv tiles, so each revisit has another block
between): dk and dv against tokamax's own XLA implementation, under each interpreter. Exits 1 while the HLO
interpreter loses the revisit, 0 once it keeps it, 4 without tokamax.
"""

import contextlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

INTERPRETERS = {"fast (HLO)": True, "faithful (TPU interpret mode)": pltpu.InterpretParams()}


def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def revisit(x):
    spec = pl.BlockSpec((8, 128), lambda h, j: (j, 0))
    return pl.pallas_call(
        add_one,
        grid=(2, 2),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={0: 0},
    )(x)


got = {}
for name, params in INTERPRETERS.items():
    with pltpu.force_tpu_interpret_mode(params):
        got[name] = np.asarray(jax.jit(revisit)(jnp.zeros((16, 128), jnp.float32)))
    print(f"each block visited twice, o = x + 1 aliased, under {name}: {sorted(set(got[name].ravel().tolist()))}")
shown = bool((got["fast (HLO)"] != 2).any())

try:
    import tokamax
    from absl import flags
    from jax._src import callback, effects
    from tokamax._src.ops.attention import pallas_mosaic_tpu, pallas_mosaic_tpu_vjp
except ImportError as e:  # tokamax installs on jax >= 0.9.2 only
    print(f"cannot run the tokamax check here: {e}")
    sys.exit(4)

flags.FLAGS.mark_as_parsed()  # tokamax reads absl flags; this script has none
# The device gate (a TPU v5 or later) of the op and its VJP op; and, for the TPU interpret mode, its callbacks
# in custom_vjp's remat optimization (docs/findings/tokamax_mosaic_faithful_interpreter.md).
for op in (pallas_mosaic_tpu.PallasMosaicTpuFlashAttention, pallas_mosaic_tpu_vjp.PallasMosaicTpuFlashAttentionVjp):
    op.supported_on = lambda self, device: True
effects.custom_derivatives_allowed_effects.add_type(callback.IOEffect)
effects.custom_derivatives_allowed_effects.add_type(callback.OrderedIOEffect)

keys = jax.random.split(jax.random.key(0), 4)
LENGTH = 256
q, dout = (jax.random.normal(key, (1, LENGTH, 2, 128), jnp.float32) for key in keys[:2])
k, v = (jax.random.normal(key, (1, LENGTH, 1, 128), jnp.float32) for key in keys[2:])
band = np.abs(np.arange(LENGTH)[:, None] - np.arange(LENGTH)[None]) <= 3
mask = jnp.asarray(band)  # a boolean mask: tokamax's dynamic-grid kernels


def grads(implementation, params=None):
    def attention(q, k, v):
        return tokamax.dot_product_attention(q, k, v, None, mask, implementation=implementation)

    with pltpu.force_tpu_interpret_mode(params) if params is not None else contextlib.nullcontext():
        _, vjp = jax.vjp(attention, q, k, v)
        return [np.asarray(g) for g in vjp(dout)]


want = grads("xla")
for name, params in INTERPRETERS.items():
    errors = [float(np.abs(a - b).max()) for a, b in zip(grads("mosaic", params), want, strict=True)]
    print(
        f"tokamax mosaic, 2 query heads on 1 kv head, {LENGTH} keys, boolean mask, under {name}: max |d - xla| "
        f"dq {errors[0]:.2e}, dk {errors[1]:.2e}, dv {errors[2]:.2e}"
    )

sys.exit(1 if shown else 0)
