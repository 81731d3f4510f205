"""The TPU interpret mode (the faithful Pallas interpreter) cannot run tokamax's Mosaic TPU attention as called.

Run: JAX_PLATFORMS=cpu python docs/findings/tokamax_mosaic_faithful_interpreter.py
Imports jax, numpy and (for the last two checks) tokamax; seconds. Two gaps, each shown first on a kernel of
a few lines, then on tokamax.dot_product_attention(implementation="mosaic") with its device gate opened:
  1. jax.custom_vjp(..., optimize_remat=True) refuses a forward function with side effects outside its
     allowlist, and the interpreter's io_callbacks are IOEffect and OrderedIOEffect: every gradient fails.
  2. the interpreter reads a kernel's dimension_semantics without the grid dimension vmap adds (the Mosaic
     lowering inserts "parallel" for it): a vmapped pallas_call with dimension_semantics fails.
Exits 1 while either gap shows, 0 once both are gone, 4 where tokamax is not installed (the first two
checks still print).
"""

import re
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

FAITHFUL = pltpu.InterpretParams()


def last_line(e: Exception) -> str:
    text = re.sub(r" object at 0x[0-9a-f]+", "", str(e).strip().splitlines()[-1])
    return f"{type(e).__name__}: {text[:200]}"


def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def kernel_call(x, semantics=None):
    params = None if semantics is None else pltpu.CompilerParams(dimension_semantics=semantics)
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        add_one,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=params,
    )(x)


@jax.custom_vjp
def f(x):
    return kernel_call(x)


def f_fwd(x):
    return kernel_call(x), None


def f_bwd(_, g):
    return (g,)


f.defvjp(f_fwd, f_bwd, optimize_remat=True)  # as tokamax/_src/ops/op.py defines every op's custom_vjp

shown = False
x = jnp.zeros((16, 128), jnp.float32)
try:
    with pltpu.force_tpu_interpret_mode(FAITHFUL):
        jax.grad(lambda x: f(x).sum())(x)
    print("1. custom_vjp(optimize_remat=True) of an interpreted kernel: gradient ok")
except NotImplementedError as e:
    print(f"1. custom_vjp(optimize_remat=True) of an interpreted kernel: {last_line(e)}")
    shown = True

try:
    with pltpu.force_tpu_interpret_mode(FAITHFUL):
        out = jax.vmap(lambda x: kernel_call(x, ("parallel",)))(jnp.zeros((2, 16, 128), jnp.float32))
    print(f"2. vmap of a kernel with dimension_semantics: ok, all ones: {bool((out == 1).all())}")
except ValueError as e:
    print(f"2. vmap of a kernel with dimension_semantics: {last_line(e)}")
    shown = True

try:
    import tokamax
    from absl import flags
    from tokamax._src.ops.attention import pallas_mosaic_tpu, pallas_mosaic_tpu_vjp
except ImportError as e:  # tokamax installs on jax >= 0.9.2 only
    print(f"cannot run the tokamax checks here: {e}")
    sys.exit(4)

flags.FLAGS.mark_as_parsed()  # tokamax reads absl flags; this script has none
# The device gate: supported_on asks for a TPU v5 or later, of the op and of its VJP op.
for op in (pallas_mosaic_tpu.PallasMosaicTpuFlashAttention, pallas_mosaic_tpu_vjp.PallasMosaicTpuFlashAttentionVjp):
    op.supported_on = lambda self, device: True


def attention(q):
    return tokamax.dot_product_attention(q, q, q, is_causal=True, implementation="mosaic")


for batch, grads in ((1, True), (2, False)):
    q = jax.random.normal(jax.random.key(0), (batch, 128, 2, 128), jnp.float32)
    what = f"3. tokamax mosaic, batch {batch}, {'gradient' if grads else 'forward'}"
    try:
        with pltpu.force_tpu_interpret_mode(FAITHFUL):
            jax.grad(lambda q: attention(q).sum())(q) if grads else attention(q)
        print(f"{what}: ok")
    except (NotImplementedError, ValueError) as e:
        print(f"{what}: {last_line(e)}")
        shown = True

sys.exit(1 if shown else 0)
