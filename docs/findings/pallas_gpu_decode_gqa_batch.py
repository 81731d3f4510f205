"""Pallas GPU decode `gqa`: batch > 1 without residuals raises a reshape TypeError (jax 0.7.0).

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_gpu_decode_gqa_batch.py
(jax and numpy only; natively on a GPU, else with interpret=True, a few seconds on CPU.) Exits 1 while a
call raises, 0 when all four run.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

try:
    from jax.experimental.pallas.ops.gpu import decode_attention
except ImportError as e:  # deprecated upstream (jax-ml/jax b74c06222f), removed in jax 0.12.1
    print(f"cannot run here: {e} (jax 0.12.1 removed the module; every release up to 0.12.0.1 has it)")
    sys.exit(4)

interpret = jax.default_backend() != "gpu"
rng = np.random.default_rng(0)
print("jax", jax.__version__)
raised = False
for batch in (1, 3):
    for residuals in (False, True):
        q = jnp.asarray(rng.standard_normal((batch, 2, 64)), jnp.float32)  # [B, q_heads, D]
        k, v = (jnp.asarray(rng.standard_normal((batch, 64, 2, 64)), jnp.float32) for _ in range(2))
        try:
            out = decode_attention.gqa(
                q, k, v, sm_scale=0.125, block_k=16, k_splits=1, return_residuals=residuals, interpret=interpret
            )
            o = out[0] if residuals else out
            logits = jnp.einsum("bhd,bshd->bhs", q, k) * 0.125  # q_heads == kv_heads: one q head per kv head
            want = jnp.einsum("bhs,bshd->bhd", jax.nn.softmax(logits, axis=-1), v)
            err = float(jnp.max(jnp.abs(o - want)))
            print(f"batch={batch} return_residuals={residuals!s:5}  ok, max error {err:.1e}")
        except TypeError as e:
            raised = True
            print(f"batch={batch} return_residuals={residuals!s:5}  TypeError: {str(e).splitlines()[0][:120]}")
sys.exit(1 if raised else 0)
