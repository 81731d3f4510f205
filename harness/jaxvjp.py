"""The one way a JAX implementation turns inputs into Outputs: call, then pull dout back."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from harness.contract import Outputs
from harness.inputs import Inputs


def _as64(a: jax.Array) -> np.ndarray:
    # Through numpy (ml_dtypes for bfloat16): a float64 truth must not pass through float32.
    return np.asarray(a).astype(np.float64)


def jax_outputs(f: Callable[..., jax.Array], inputs: Inputs, *, grads: bool) -> Outputs:
    """Run f(q, k, v[, bias]) (bias only when the case has one) and, with grads, its VJP of inputs.dout."""
    arrays = [inputs.q, inputs.k, inputs.v] + ([inputs.bias] if inputs.bias is not None else [])
    primals = [jnp.asarray(a) for a in arrays]
    if not grads:
        return Outputs(out=_as64(jax.block_until_ready(f(*primals))))
    out, pullback = jax.vjp(f, *primals)
    cots = jax.block_until_ready(pullback(jnp.asarray(inputs.dout)))
    return Outputs(
        out=_as64(out),
        dq=_as64(cots[0]),
        dk=_as64(cots[1]),
        dv=_as64(cots[2]),
        dbias=_as64(cots[3]) if len(cots) > 3 else None,
    )
