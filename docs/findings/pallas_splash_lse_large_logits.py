"""Pallas TPU splash attention's backward loses precision on rows whose logits lie far from zero.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_splash_lse_large_logits.py
Imports only jax, numpy and the standard library (the kernel under the Pallas HLO interpreter,
make_splash_mha(..., interpret=True), on the CPU).
q and k on a grid of halves, so every float32 logit q.k is exact (splash applies no scale); one
component shifts every logit of a row by -2**17 (softmax is shift-invariant, so the truth is the
unshifted one). The forward keeps the row max m and the sum l apart and stays accurate; the backward
recomputes p = exp(qk - logsumexp) from the residual logsumexp = m + log(l), stored in float32 near
-1.3e5 (ulp 2**-7), so p is off by a row-wide factor up to exp(2**-8). The same call with no shift
is the control. Exits 1 while the kernel's dv error exceeds 10x a float32 softmax backward's, 0 once
it does not.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

L, D, SHIFT = 128, 64, 2.0**17
rng = np.random.default_rng(0)
q0 = np.rint(rng.standard_normal((1, L, D)) * 2) / 2  # [heads, seq, head_dim]
k0 = np.rint(rng.standard_normal((1, L, D)) * 2) / 2
v = rng.standard_normal((1, L, D))
dout = rng.standard_normal((1, L, D))
A = 2.0**9


def shifted(shift):
    """q and k with every logit of every row moved by -shift, exactly (q[..., 0] * k[..., 0])."""
    q, k = q0.copy(), k0.copy()
    q[..., 0], k[..., 0] = -A, shift / A
    return q, k


def reference(q, k, dtype):
    """out, dq, dk, dv of softmax(q k^T) v in `dtype`, the row max subtracted first."""
    q, k, vv, do = (x.astype(dtype) for x in (q, k, v, dout))
    s = np.einsum("hqd,hkd->hqk", q, k)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    dp = np.einsum("hqd,hkd->hqk", do, vv)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    return {
        "out": np.einsum("hqk,hkd->hqd", p, vv),
        "dq": np.einsum("hqk,hkd->hqd", ds, k),
        "dk": np.einsum("hqk,hqd->hkd", ds, q),
        "dv": np.einsum("hqk,hqd->hkd", p, do),
    }


mask = mask_lib.MultiHeadMask((mask_lib.FullMask((L, L)),))
kernel = splash.make_splash_mha(mask, head_shards=1, q_seq_shards=1, interpret=True)
# The same forward, returning its residual (out, (logsumexp [heads, seq],)): what the backward reads.
with_lse = splash.make_splash_mha(mask, head_shards=1, q_seq_shards=1, save_residuals=True, interpret=True)
truth = reference(*shifted(0.0), np.float64)  # softmax is shift-invariant: the unshifted truth
errors = {}
for shift in (0.0, SHIFT):
    q, k = shifted(shift)
    ruler = reference(q, k, np.float32)
    s64 = np.einsum("hqd,hkd->hqk", q, k)
    lse64 = s64.max(-1) + np.log(np.exp(s64 - s64.max(-1, keepdims=True)).sum(-1))
    _, (lse,) = with_lse(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)))
    ulp = float(np.spacing(np.float32(np.abs(lse64).max())))
    label = f"logits shifted by {-int(shift)}"
    lse_err = float(np.abs(np.asarray(lse, np.float64) - lse64).max())
    print(f"{label}: logsumexp residual max |kernel - truth| = {lse_err:.2e} (float32 ulp there {ulp:.2e})")
    out, pullback = jax.vjp(kernel, *(jnp.asarray(x, jnp.float32) for x in (q, k, v)))
    got = dict(zip(("out", "dq", "dk", "dv"), (out, *pullback(jnp.asarray(dout, jnp.float32))), strict=True))
    for name, value in got.items():
        err = float(np.abs(np.asarray(value, np.float64) - truth[name]).max())
        ref = float(np.abs(ruler[name] - truth[name]).max())
        errors[shift, name] = (err, ref)
        print(f"{label}: {name} max |kernel - truth| = {err:.2e}; float32 reference {ref:.2e}")
err, ref = errors[SHIFT, "dv"]
sys.exit(1 if err > 10 * ref else 0)
