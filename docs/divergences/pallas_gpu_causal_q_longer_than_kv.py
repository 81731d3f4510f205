"""Pallas GPU mha: causal with q_len > kv_len disagrees with its own mha_reference.

Run: JAX_PLATFORMS=cpu python docs/divergences/pallas_gpu_causal_q_longer_than_kv.py
(jax and numpy only; natively on a GPU, else with interpret=True, seconds on CPU.)
128 queries, 64 keys, head_dim 64, causal, 64-row forward tiles: queries 64..127 see every key. Prints, for
q_len <= kv_len and q_len > kv_len, the largest difference of the output and of dq, dk, dv from
mha_reference. Exits 1 while the q_len > kv_len case disagrees (or is non-finite), 0 when it agrees.
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

interpret = jax.default_backend() != "gpu"
rng = np.random.default_rng(0)


def worst(q_len: int, kv_len: int) -> dict[str, float]:
    """max |mha - mha_reference| of out, dq, dk, dv (inf where the kernel is non-finite)."""
    q = jnp.asarray(rng.standard_normal((1, q_len, 1, 64)), jnp.float32)  # [batch, seq, heads, head_dim]
    k, v = (jnp.asarray(rng.standard_normal((1, kv_len, 1, 64)), jnp.float32) for _ in range(2))
    # The fused backward needs q_len / block_q_dq == kv_len / block_kv_dkv: two tiles of each.
    sizes = attention.BlockSizes(
        block_q=64, block_k=64, block_q_dkv=32, block_kv_dkv=kv_len // 2, block_q_dq=q_len // 2, block_kv_dq=32
    )
    kernel = lambda q, k, v: attention.mha(  # noqa: E731
        q, k, v, None, sm_scale=0.125, causal=True, block_sizes=sizes, interpret=interpret
    )
    ref = lambda q, k, v: attention.mha_reference(q, k, v, None, sm_scale=0.125, causal=True)  # noqa: E731
    out = {}
    for name, f in (("kernel", kernel), ("reference", ref)):
        o, vjp = jax.vjp(f, q, k, v)
        out[name] = (o, *vjp(jnp.ones_like(o)))
    return {
        n: float(jnp.where(jnp.isfinite(a), jnp.abs(a - b), np.inf).max())
        for n, a, b in zip(("out", "dq", "dk", "dv"), out["kernel"], out["reference"], strict=True)
    }


shown = False
for q_len, kv_len in ((64, 128), (128, 64)):
    errs = worst(q_len, kv_len)
    shown |= q_len > kv_len and max(errs.values()) > 1e-4
    print(
        f"causal q_len={q_len:3} kv_len={kv_len:3}: max |mha - mha_reference| "
        + ", ".join(f"{n} {e:.1e}" for n, e in errs.items())
    )
sys.exit(1 if shown else 0)
