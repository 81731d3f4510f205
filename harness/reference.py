"""The reference computation: pure-JAX attention on the dense mask, the float64 ground truth and the ruler.

Written from the definition, softmax(Q K^T * scale + bias) V, with none of a kernel's
tiling or online softmax. In float64 it is the truth; in the case dtype its error
against the truth is the yardstick a kernel's error is measured by. Part of the core: the
runner measures every subject against it. The `jax_reference` oracle (oracles/jax_reference.py)
registers the same computation as an implementation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from harness import compat, placement
from harness.case import Case
from harness.contract import Outputs
from harness.inputs import Inputs
from harness.jaxvjp import jax_outputs


def attention(q, k, v, bias, visible, scale):
    """q [B,Hq,Lq,D], k/v [B,Hkv,Lk,D], bias [B,Hq,Lq,Lk] or None, visible bool [B,Hq,Lq,Lk]."""
    group = q.shape[1] // k.shape[1]
    k = jnp.repeat(k, group, axis=1)
    v = jnp.repeat(v, group, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * jnp.asarray(scale, q.dtype)
    if bias is not None:
        s = s + bias
    s = jnp.where(visible, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    m = jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0))
    p = jnp.exp(s - m)
    denom = jnp.sum(p, axis=-1, keepdims=True)
    # Rows with no visible key have denom 0: their output is 0 (declared convention).
    p = p / jnp.where(denom == 0, 1, denom)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)


def run_reference(case: Case, inputs: Inputs, *, grads: bool, dtype) -> Outputs:
    """The reference in `dtype` (a numpy/jax dtype); inputs are cast from the case dtype exactly.

    Always on the CPU backend (harness.placement), whatever JAX's default device is.
    """
    cast = inputs.astype(np.float64) if jnp.dtype(dtype) == jnp.float64 else inputs
    device = placement.reference_device()
    visible = jax.device_put(inputs.visible, device)

    def f(q, k, v, *bias):
        return attention(q, k, v, bias[0] if bias else None, visible, case.sm_scale)

    return jax_outputs(f, cast, grads=grads, device=device)


def truth(case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
    """Float64 ground truth from the case-dtype inputs (upcast exactly)."""
    with compat.enable_x64():
        return run_reference(case, inputs, grads=grads, dtype=jnp.float64)
