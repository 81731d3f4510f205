"""The one way a JAX implementation turns inputs into Outputs: call, then pull dout back."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from harness import placement
from harness.contract import Outputs
from harness.inputs import Inputs


def _as64(a: jax.Array) -> np.ndarray:
    # Through numpy (ml_dtypes for bfloat16): a float64 truth must not pass through float32.
    return np.asarray(a).astype(np.float64)


def jax_outputs(f: Callable[..., jax.Array], inputs: Inputs, *, grads: bool, device: jax.Device) -> Outputs:
    """Run f(q, k, v[, bias]) (bias only when the case has one) and, with grads, its VJP of inputs.dout,
    on `device` (harness.placement: the kernel device for kernels, the CPU for references)."""
    arrays = [inputs.q, inputs.k, inputs.v] + ([inputs.bias] if inputs.bias is not None else [])
    # Explicit placement commits the arguments, so the computation runs where they are; constants
    # made while tracing follow the default device set by placement.on.
    primals = [jax.device_put(jnp.asarray(a), device) for a in arrays]
    with placement.on(device):
        if not grads:
            return Outputs(out=_as64(jax.block_until_ready(f(*primals))))
        out, pullback = jax.vjp(f, *primals)
        cots = jax.block_until_ready(pullback(jax.device_put(jnp.asarray(inputs.dout), device)))
    return Outputs(
        out=_as64(out),
        dq=_as64(cots[0]),
        dk=_as64(cots[1]),
        dv=_as64(cots[2]),
        dbias=_as64(cots[3]) if len(cots) > 3 else None,
    )
