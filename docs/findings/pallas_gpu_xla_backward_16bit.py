"""Pallas GPU mha: backward_pass_impl="xla" fails for float16 and bfloat16 inputs.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_gpu_xla_backward_16bit.py
(jax and numpy only; natively on a GPU, else with interpret=True, a few seconds on CPU.) Exits 1 while a
16-bit dtype raises, 0 when all three differentiate.
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
raised = False
for dtype in (jnp.float32, jnp.float16, jnp.bfloat16):
    q, k, v = (jnp.asarray(rng.standard_normal((1, 64, 1, 64)), dtype) for _ in range(3))

    def loss(q, k, v):
        out = attention.mha(q, k, v, None, sm_scale=0.125, backward_pass_impl="xla", interpret=interpret)
        return out.astype(jnp.float32).sum()

    try:
        jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
        print(f"{jnp.dtype(dtype).name:9s} ok")
    except (TypeError, ValueError) as e:
        raised = True
        print(f"{jnp.dtype(dtype).name:9s} {type(e).__name__}: {str(e).splitlines()[0][:160]}")
sys.exit(1 if raised else 0)
