"""jax.nn.dot_product_attention(implementation="xla") computes a float64 softmax in float32.

Run: JAX_PLATFORMS=cpu python docs/findings/jax_xla_float64_softmax_in_float32.py
(jax and numpy only; a second or two.) Exits 1 while the float64 output has a float32-sized error
(over 1e-12), 0 when it is float64-sized.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(0)
B, T, N, H = 1, 64, 2, 32
q, k, v = (rng.standard_normal((B, T, N, H)) for _ in range(3))


def truth(q, k, v):
    """softmax(q k^T / sqrt(H)) v in numpy longdouble (80-bit on x86-64), rounded to float64."""
    q, k, v = (a.astype(np.longdouble) for a in (q, k, v))
    s = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(np.longdouble(H))
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v).astype(np.float64)


want = truth(q, k, v)
got = np.asarray(jax.nn.dot_product_attention(q, k, v, implementation="xla"))
plain = np.asarray(jax.nn.softmax(jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(H), axis=-1))
plain = np.einsum("bnts,bsnh->btnh", plain, v)
print("output dtype                          ", got.dtype)
print("max |dot_product_attention - truth|   ", np.abs(got - want).max())
print("max |float64 jnp softmax - truth|     ", np.abs(plain - want).max())
print("float64 eps, float32 eps              ", np.finfo(np.float64).eps, np.finfo(np.float32).eps)
sys.exit(1 if np.abs(got - want).max() > 1e-12 else 0)
