"""paged_attention rounds float32 K/V pages to bfloat16 before computing in float32.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_paged_float32_pages_bf16.py
Imports only jax and numpy (the kernel runs under the Pallas TPU interpreter on CPU, or
natively on a TPU). Compares the kernel with a float64 reference on float32 inputs, and with
the same reference on the inputs rounded to bfloat16: the kernel matches the second. Exits 1 while the
error against the float32 truth is bfloat16-sized (over 1e-4), 0 when it is float32-sized.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import paged_attention as pa

rng = np.random.default_rng(0)
batch, heads, dim, page_size, pages = 1, 1, 128, 16, 4
q = rng.standard_normal((batch, heads, dim)).astype(np.float32) / np.sqrt(dim)
k = rng.standard_normal((heads, pages, page_size, dim)).astype(np.float32)
v = rng.standard_normal((heads, pages, page_size, dim)).astype(np.float32)
lengths = np.array([pages * page_size], np.int32)
table = np.arange(pages, dtype=np.int32)[None]


def reference(k, v):
    kk = k[0].reshape(-1, dim).astype(np.float64)
    vv = v[0].reshape(-1, dim).astype(np.float64)
    s = q[0, 0].astype(np.float64) @ kk.T
    p = np.exp(s - s.max())
    return (p / p.sum()) @ vv


call = jax.jit(lambda *a: pa.paged_attention(*a, pages_per_compute_block=1))
ctx = pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()) if jax.default_backend() != "tpu" else None
with ctx or jax.default_device(jax.devices()[0]):
    got = np.asarray(call(q, k, v, lengths, table))[0, 0].astype(np.float64)
to_bf16 = lambda a: np.asarray(jnp.asarray(a, jnp.bfloat16).astype(jnp.float32))  # noqa: E731
print("max |kernel - float32 truth|          =", np.abs(got - reference(k, v)).max())
print("max |kernel - truth of bf16-rounded K/V| =", np.abs(got - reference(to_bf16(k), to_bf16(v))).max())
sys.exit(1 if np.abs(got - reference(k, v)).max() > 1e-4 else 0)
