"""Pure-JAX attention on the dense mask: the float64 ground truth and the same-dtype ruler.

Written from the definition, softmax(Q K^T * scale + bias) V, with none of a kernel's
tiling or online softmax. In float64 it is the truth; in the case dtype its error
against the truth is the yardstick a kernel's error is measured by.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from harness import compat, placement
from harness.case import DTYPES, KV_FORMATS, Case
from harness.contract import Capabilities, Conventions, Implementation, Outputs, register
from harness.inputs import Inputs
from harness.jaxvjp import compiled_outputs
from harness.masks import MASK_COMPONENTS


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
    # The mask and the scale are arguments of one compiled program per shape and dtype
    # (harness.jaxvjp.compiled_outputs), reused by every case of those shapes.
    scale = np.asarray(case.sm_scale, cast.q.dtype)
    fn = _with_bias if cast.bias is not None else _without_bias
    return compiled_outputs(fn, cast, grads=grads, device=placement.reference_device(), args=(inputs.visible, scale))


def _with_bias(q, k, v, bias, visible, scale):
    return attention(q, k, v, bias, visible, scale)


def _without_bias(q, k, v, visible, scale):
    return attention(q, k, v, None, visible, scale)


def truth(case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
    """Float64 ground truth from the case-dtype inputs (upcast exactly)."""
    with compat.enable_x64():
        return run_reference(case, inputs, grads=grads, dtype=jnp.float64)


class JaxReference(Implementation):
    name = "jax_reference"
    role = "oracle"
    framework = "jax"
    description = "pure-JAX softmax(QK^T*scale+bias)V on the dense mask, computed in the case dtype"
    capabilities = Capabilities(
        dtypes=DTYPES,
        head_dims=(32, 64, 80, 128, 256),
        seq_lens=(16, 64, 128, 256),
        # Every mask component: oracles read the dense mask (harness.masks.dense_mask).
        mask_components=frozenset(MASK_COMPONENTS | {"bias"}),
        # Quantized K/V arrive dequantized (harness.inputs): nothing to do.
        kv_formats=KV_FORMATS,
    )
    conventions = Conventions(
        bias="QK^T * scale + bias",
        causal="as the case declares (dense mask)",
        gqa="repeats k/v heads",
        empty_rows="zeros",
    )

    def violations(self, case: Case) -> list[str]:
        return [p for p in super().violations(case) if not p.startswith("head_dim")]

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        return run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)


register(JaxReference())
