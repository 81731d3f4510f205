"""Pallas TPU flash attention's dq for one batch row depends on the batch it is computed in (by an ulp).

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_flash_dq_batch_dependent.py
Imports only jax, numpy and the standard library; the kernel under the Pallas TPU interpreter (the HLO
one, pallas_call(interpret=True), forced around the call). B=2, H=2, L=128, D=64, float32, no mask: the
forward, dk and dv of row 1 are the same bits alone as in the batch; this prints which quantities of
row 1 differ. Exits 1 while dq differs, 0 once every quantity is the same bits.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import flash_attention as fa

rng = np.random.default_rng(5)
q, k, v, dout = (jnp.asarray(rng.standard_normal((2, 2, 128, 64)), jnp.float32) for _ in range(4))


def grads(q, k, v, dout):
    out, pullback = jax.vjp(lambda *a: fa.flash_attention(*a, sm_scale=0.125), q, k, v)
    return (out, *pullback(dout))


with pltpu.force_tpu_interpret_mode(True):
    whole = grads(q, k, v, dout)
    alone = grads(q[1:], k[1:], v[1:], dout[1:])
differ = []
for name, a, b in zip(("out", "dq", "dk", "dv"), whole, alone, strict=True):
    diff = float(jnp.abs(a[1:] - b).max())
    print(f"row 1 {name}: max |in batch of 2 - alone| = {diff:.3e}")
    differ += [name] * (diff != 0.0)
# The backward's di = sum(o * do, -1), computed by XLA outside the kernel, is the only input of dq and
# dk that dv lacks: XLA's CPU reduction of it gives other bits for a batch of 2 than for the row alone.
di = jax.jit(lambda o, do: jnp.sum(o * do, axis=-1))
gap = float(jnp.abs(di(q, v)[1:] - di(q[1:], v[1:])).max())
print(f"XLA sum(o * do, -1), row 1: max |in batch of 2 - alone| = {gap:.3e}")
sys.exit(1 if "dq" in differ else 0)
