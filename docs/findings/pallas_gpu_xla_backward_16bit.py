"""Pallas GPU mha: backward_pass_impl="xla" fails for float16 and bfloat16 inputs.

Run: JAX_PLATFORMS=cpu python docs/findings/pallas_gpu_xla_backward_16bit.py
(jax and numpy only; natively on a GPU, else with interpret=True, a few seconds on CPU.)
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.gpu import attention

interpret = jax.default_backend() != "gpu"
rng = np.random.default_rng(0)
for dtype in (jnp.float32, jnp.float16, jnp.bfloat16):
    q, k, v = (jnp.asarray(rng.standard_normal((1, 64, 1, 64)), dtype) for _ in range(3))

    def loss(q, k, v):
        out = attention.mha(q, k, v, None, sm_scale=0.125, backward_pass_impl="xla", interpret=interpret)
        return out.astype(jnp.float32).sum()

    try:
        jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
        print(f"{jnp.dtype(dtype).name:9s} ok")
    except (TypeError, ValueError) as e:
        print(f"{jnp.dtype(dtype).name:9s} {type(e).__name__}: {str(e).splitlines()[0][:160]}")
