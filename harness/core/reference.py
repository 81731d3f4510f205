"""The reference computation: pure-JAX attention on the dense mask, the float64 ground truth and the ruler.

Written from the definition, softmax(cap(Q K^T * scale + bias)) V with the sinks in the
denominator (harness.core.case.Case), with none of a kernel's tiling or online softmax. In float64
it is the truth; in the case dtype its error against the truth is the yardstick a kernel's
error is measured by. A float64 case's truth is computed in extended precision instead
(harness.core.extended), since float64 cannot be its own truth. Part of the core: the runner
measures every subject against it. The `jax_reference` oracle (oracles/jax_reference.py)
registers the same computation as an implementation.
"""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from harness.core import extended
from harness.core.case import FLOAT64, Case
from harness.core.contract import Outputs
from harness.core.errors import InputError
from harness.core.inputs import Inputs
from harness.core.jaxvjp import compiled_outputs
from harness.runtime import compat, isa, placement


def _logits(q, k, bias, visible, scale, soft_cap):
    group = q.shape[1] // k.shape[1]
    k = jnp.repeat(k, group, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * jnp.asarray(scale, q.dtype)
    if bias is not None:
        s = s + bias
    if soft_cap is not None:
        cap = jnp.asarray(soft_cap, s.dtype)
        s = cap * jnp.tanh(s / cap)
    return jnp.where(visible, s, -jnp.inf)


def _max(s, sinks):
    m = jnp.max(s, axis=-1, keepdims=True)
    if sinks is not None:
        m = jnp.maximum(m, sinks.astype(s.dtype)[None, :, None, None])
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0))


def _denominator(p, m, sinks):
    denom = jnp.sum(p, axis=-1, keepdims=True)
    if sinks is not None:
        denom = denom + jnp.exp(sinks.astype(p.dtype)[None, :, None, None] - m)
    return denom


def attention(q, k, v, bias, visible, scale, soft_cap=None, sinks=None):
    """q [B,Hq,Lq,D], k/v [B,Hkv,Lk,D], bias [B,Hq,Lq,Lk] or None, visible bool [B,Hq,Lq,Lk],
    soft_cap a float or None, sinks [Hq] or None."""
    s = _logits(q, k, bias, visible, scale, soft_cap)
    m = _max(s, sinks)
    p = jnp.exp(s - m)
    denom = _denominator(p, m, sinks)
    # Rows with no visible key (and no sink) have denom 0: their output is 0 (declared convention).
    p = p / jnp.where(denom == 0, 1, denom)
    v = jnp.repeat(v, q.shape[1] // k.shape[1], axis=1)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)


def logsumexp(q, k, bias, visible, scale, soft_cap=None, sinks=None):
    """Each row's natural-log logsumexp [B,Hq,Lq], sinks included; -inf on rows with nothing visible."""
    s = _logits(q, k, bias, visible, scale, soft_cap)
    m = _max(s, sinks)
    return (m + jnp.log(_denominator(jnp.exp(s - m), m, sinks)))[..., 0]


def run_reference(case: Case, inputs: Inputs, *, grads: bool, dtype) -> Outputs:
    """The reference in `dtype` (a numpy/jax dtype); inputs are cast from the case dtype exactly.

    Always on the CPU backend (harness.runtime.placement), whatever JAX's default device is; with
    float64 enabled around the call only. The logsumexp only when the case asks for residuals.
    """
    wide = jnp.dtype(dtype) == jnp.float64
    if jnp.dtype(dtype) == jnp.float16 and (refused := isa.float16_refusal()):
        raise InputError(f"a float16 case has no ruler here: {refused}")  # the setting to fix, not a crash
    cast = inputs.astype(np.float64) if wide else inputs
    device = placement.reference_device()
    with compat.enable_x64() if wide else contextlib.nullcontext():
        # The mask, the scale, the cap and the sinks are arguments of one compiled program per shape
        # and dtype (harness.core.jaxvjp.compiled_outputs), reused by every case of those shapes; which of
        # them a case has is static, so a program is never reused for a case of another form.
        # The sinks are a primal (harness.core.jaxvjp), so the program also gives their gradient.
        args = [inputs.visible, np.asarray(case.sm_scale, cast.q.dtype)]
        if case.soft_cap is not None:
            args.append(np.asarray(case.soft_cap, cast.q.dtype))
        static = (
            ("bias", cast.bias is not None),
            ("soft_cap", case.soft_cap is not None),
            ("sinks", cast.sinks is not None),
        )
        got = compiled_outputs(_reference, cast, grads=grads, device=device, args=tuple(args), static=static)
        if case.residuals:
            # A compiled program of its own too: run one operation at a time, each operation compiled
            # anew for each new shape, it took 37.8 s of a 60-case run's 488 under cProfile (34 cases).
            lse = compiled_outputs(_logsumexp, cast, grads=False, device=device, args=tuple(args), static=static)
            got = dataclasses.replace(got, lse=lse.out)
    return got


def _arguments(rest: tuple, *, bias: bool, soft_cap: bool, sinks: bool) -> tuple:
    """(bias, sinks, visible, scale, soft_cap) from what follows q, k, v as compiled_outputs passes them:
    [bias][, sinks], then visible, scale[, soft_cap]."""
    rest = list(rest)
    b = rest.pop(0) if bias else None
    s = rest.pop(0) if sinks else None
    visible, scale = rest.pop(0), rest.pop(0)
    cap = rest.pop(0) if soft_cap else None
    return b, s, visible, scale, cap


def _reference(q, k, v, *rest, bias: bool, soft_cap: bool, sinks: bool):
    """attention() with its optional inputs as positional arguments, as compiled_outputs passes them."""
    b, s, visible, scale, cap = _arguments(rest, bias=bias, soft_cap=soft_cap, sinks=sinks)
    return attention(q, k, v, b, visible, scale, cap, s)


def _logsumexp(q, k, v, *rest, bias: bool, soft_cap: bool, sinks: bool):
    """logsumexp() with its optional inputs as positional arguments, as compiled_outputs passes them (v unused)."""
    b, s, visible, scale, cap = _arguments(rest, bias=bias, soft_cap=soft_cap, sinks=sinks)
    return logsumexp(q, k, b, visible, scale, cap, s)


# The float64 truth's program keys met so far in this process (_truth_key). The truth of a shape met
# for the first time is computed in numpy (harness.core.extended in float64: the same definition,
# forward and backward by hand), from then on by the compiled program: compiling costs 0.25-0.95
# CPU s per new shape, a reused program 0.003-0.1, numpy 0.003-0.5 per call, so numpy is the cheaper
# for a shape met once and the program for one met often. Measured at 30 drawn pallas_flash cases
# (23 shapes, benchmarks/references.py): 12.1 CPU s all compiled, 4.4 all numpy, and about 3.7 this
# way (estimated from the per-case timings of those two runs, not measured as a run of its own); the
# two truths differed by at most 1.5e-13.
_TRUTH_SEEN: set[tuple] = set()


def _truth_key(case: Case, inputs: Inputs, *, grads: bool) -> tuple:
    """What the compiled float64 truth's program depends on (harness.core.jaxvjp.compiled_outputs)."""
    shapes = tuple(None if a is None else a.shape for a in (inputs.q, inputs.k, inputs.v, inputs.bias, inputs.sinks))
    return shapes, grads, case.soft_cap is not None, case.residuals


def truth(case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
    """The ground truth from the case-dtype inputs (upcast exactly): float64 (numpy for a shape met for
    the first time, the compiled reference after: _TRUTH_SEEN), or for a float64 case extended precision
    (harness.core.extended)."""
    if case.dtype == FLOAT64:
        got = extended.truth(case, inputs, grads=grads)
        return got if case.residuals else dataclasses.replace(got, lse=None)
    key = _truth_key(case, inputs, grads=grads)
    if key in _TRUTH_SEEN:
        return run_reference(case, inputs, grads=grads, dtype=jnp.float64)
    _TRUTH_SEEN.add(key)
    got = extended.attention(case, inputs, grads=grads, dtype=np.float64)
    return got if case.residuals else dataclasses.replace(got, lse=None)
