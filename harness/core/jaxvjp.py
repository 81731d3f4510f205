"""The one way a JAX implementation turns inputs into Outputs: call, then pull dout back."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.core.contract import Outputs
from harness.core.inputs import Inputs
from harness.runtime import placement


def _as64(a: jax.Array) -> np.ndarray:
    # Through numpy (ml_dtypes for bfloat16): a float64 truth must not pass through float32.
    return np.asarray(a).astype(np.float64)


def _differentiable(inputs: Inputs) -> tuple[tuple[str, ...], list[np.ndarray]]:
    """The arrays a case differentiates, in call order q, k, v[, bias][, sinks] (each optional one only
    when the case has it), with the Outputs field each one's cotangent fills."""
    named = [("dq", inputs.q), ("dk", inputs.k), ("dv", inputs.v), ("dbias", inputs.bias), ("dsinks", inputs.sinks)]
    present = [(name, a) for name, a in named if a is not None]
    return tuple(name for name, _ in present), [a for _, a in present]


def _gradients(names: tuple[str, ...], cots: Any) -> dict[str, np.ndarray]:
    return {name: _as64(c) for name, c in zip(names, cots, strict=True)}


def jax_outputs(f: Callable[..., jax.Array], inputs: Inputs, *, grads: bool, device: jax.Device) -> Outputs:
    """Run f(q, k, v[, bias][, sinks]) (bias and sinks only when the case has them) and, with grads,
    its VJP of inputs.dout, on `device` (harness.runtime.placement: the kernel device for kernels, the
    CPU for references). The sinks are a primal like q, so their gradient is the implementation's own."""
    names, arrays = _differentiable(inputs)
    # Explicit placement commits the arguments, so the computation runs where they are; constants
    # made while tracing follow the default device set by placement.on.
    primals = [jax.device_put(jnp.asarray(a), device) for a in arrays]
    with placement.on(device):
        if not grads:
            return Outputs(out=_as64(jax.block_until_ready(f(*primals))))
        out, pullback = jax.vjp(f, *primals)
        cots = jax.block_until_ready(pullback(jax.device_put(jnp.asarray(inputs.dout), device)))
    return Outputs(out=_as64(out), **_gradients(names, cots))


# Compiled reference programs kept past jax.clear_caches (which the search calls to bound the
# kernels' memory), keyed by everything a program depends on. A 60-case pallas_flash run's references
# need 71 programs (the ruler, the float64 truth and the logsumexp per shape and dtype): with 16 kept
# they were compiled 98 times, with 64 72 times, for 31 MB more at its peak (about 0.65 MB a program).
_COMPILED: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
COMPILED_KEEP = 64
# Off, a fused program may skip the rounding of intermediates in bfloat16/float16 that the
# same operations run one by one apply: a same-dtype ruler would turn more precise than the
# operations it stands for, and every tolerance derived from it tighter.
# Without loop fusion ("fusion": XLA CPU's elementwise fusion pass) every operation writes its
# result in its dtype, as run one by one. Fused, a multiply and the add that consumes it share a
# loop, and XLA's CPU backend lets LLVM contract them into one FMA whatever the options
# (AllowFPOpFusion=Fast), rounding once where the operations round twice, on the ISAs that have
# the FMA for the dtype: AVX512-FP16 for float16, FMA3 (AVX2 and up) for float32. On a Xeon at
# --xla_cpu_max_isa=AVX512, 51% of a float16 ruler's `out` differed from the operations one by one
# (max 2.9e-3; issue 42): rounding s * scale + bias once instead of twice gives exactly those figures
# (computed, on a host without AVX512-FP16). tests/test_jaxvjp.py checks no program keeps such a pair.
# The price is in compiling: CPU s for tests/test_jaxvjp.py's case (fwd+bwd, bias) went from 0.45 to
# 0.89 in float16 and 0.28 to 0.62 in float32; a compiled program's call stayed about 1 ms (AVX2).
COMPILER_OPTIONS = {"xla_allow_excess_precision": False, "xla_disable_hlo_passes": "fusion"}


def _program(fn: Callable[..., jax.Array], n_primals: int, grads: bool, static: tuple) -> Callable[..., Any]:
    def program(*arrays: jax.Array) -> Any:
        primals, rest, dout = arrays[:n_primals], arrays[n_primals:-1], arrays[-1]

        def f(*p: jax.Array) -> jax.Array:
            return fn(*p, *rest, **dict(static))

        if not grads:
            return (f(*primals),)
        out, pullback = jax.vjp(f, *primals)
        return (out, *pullback(dout))

    return program


def compiled_outputs(
    fn: Callable[..., jax.Array],
    inputs: Inputs,
    *,
    grads: bool,
    device: jax.Device,
    args: tuple[np.ndarray, ...] = (),
    static: tuple[tuple[str, Any], ...] = (),
) -> Outputs:
    """What jax_outputs computes, as one compiled program per shape instead of one per operation.

    fn(q, k, v[, bias][, sinks], *args, **dict(static)) must be a module-level function: every value it
    depends on is an argument, `args` traced arrays (a mask, a scale) and `static` hashable
    Python values, so one program serves every case of the same shapes and dtypes, and a
    compiled program is never reused for a case it was not compiled for. Compiling once costs
    about what running the operations one by one costs for a new shape, and the program is
    kept (COMPILED_KEEP) and cached on disk by JAX's persistent cache (harness.runtime.compat).
    """
    names, arrays = _differentiable(inputs)
    n_primals = len(arrays)
    placed = [jax.device_put(jnp.asarray(a), device) for a in (*arrays, *args, inputs.dout)]
    key = (
        fn,
        n_primals,
        grads,
        static,
        device,
        bool(jax.config.jax_enable_x64),
        tuple((a.shape, str(a.dtype)) for a in placed),
    )
    with placement.on(device):
        compiled = _COMPILED.get(key)
        if compiled is None:
            program = jax.jit(_program(fn, n_primals, grads, static))
            compiled = program.lower(*placed).compile(compiler_options=COMPILER_OPTIONS)
            _COMPILED[key] = compiled
            while len(_COMPILED) > COMPILED_KEEP:
                _COMPILED.popitem(last=False)
        else:
            _COMPILED.move_to_end(key)
        results = jax.block_until_ready(compiled(*placed))
    if not grads:
        return Outputs(out=_as64(results[0]))
    return Outputs(out=_as64(results[0]), **_gradients(names, results[1:]))
