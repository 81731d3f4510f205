"""Pallas GPU flash attention's backward loses precision on rows whose logits lie far from zero.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_gpu_exp2_large_logits.py
Imports only jax, numpy and the standard library (the kernel under interpret=True on the CPU).
q and k on a grid of halves, so every float32 logit q.k * sm_scale is exact; one component shifts every
logit of a row by -2**17 (softmax is shift-invariant, so the truth is the unshifted one). The forward
stays accurate; the backward recomputes p = exp2(qk * log2(e) - lse) from the logsumexp residual,
stored in float32 near -1.9e5 (ulp 2**-6), so p is off by a row-wide factor up to 2**(2**-7).
Exits 1 while the kernel's dv error exceeds 10x a float32 softmax backward's, 0 once it does not.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

try:
    from jax.experimental.pallas.ops.gpu import attention
except ImportError as e:  # deprecated upstream (jax-ml/jax b74c06222f), removed in jax 0.12.1
    print(f"cannot run here: {e} (jax 0.12.1 removed the module; every release up to 0.12.0.1 has it)")
    sys.exit(4)

L, D, SCALE, SHIFT = 64, 64, 1.0, 2.0**17
rng = np.random.default_rng(0)
q = np.rint(rng.standard_normal((1, L, 1, D)) * 2) / 2  # [batch, seq, heads, head_dim]
k = np.rint(rng.standard_normal((1, L, 1, D)) * 2) / 2
v = rng.standard_normal((1, L, 1, D))
dout = rng.standard_normal((1, L, 1, D))
a = 2.0**9
q[..., 0], k[..., 0] = -a, SHIFT / (SCALE * a)  # every logit of every row moved by -SHIFT, exactly


def reference(dtype):
    """out and dv of softmax(q k^T * scale) v in `dtype`, the row max subtracted first."""
    s = np.einsum("bqhd,bkhd->bhqk", q.astype(dtype), k.astype(dtype)) * dtype(SCALE)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", p, v.astype(dtype))
    dv = np.einsum("bhqk,bqhd->bkhd", p, dout.astype(dtype))
    return out, dv


(out64, dv64), (out32, dv32) = reference(np.float64), reference(np.float32)
f = lambda q_, k_, v_: attention.mha(q_, k_, v_, None, sm_scale=SCALE, interpret=True)  # noqa: E731
arrays = [jnp.asarray(x, jnp.float32) for x in (q, k, v)]
out, pullback = jax.vjp(f, *arrays)
_, _, dv = pullback(jnp.asarray(dout, jnp.float32))
err = {
    name: float(np.abs(np.asarray(got, np.float64) - want).max())
    for name, got, want in (("out", out, out64), ("dv", dv, dv64))
}
ruler = {"out": float(np.abs(out32 - out64).max()), "dv": float(np.abs(dv32 - dv64).max())}
for name in err:
    print(
        f"logits near -{SHIFT:.0f}: {name} max |kernel - truth| = {err[name]:.2e}; float32 reference {ruler[name]:.2e}"
    )
sys.exit(1 if err["dv"] > 10 * ruler["dv"] else 0)
