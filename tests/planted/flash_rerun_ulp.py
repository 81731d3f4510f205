"""Negative control for the reproducibility rerun (harness.running.determinism): upstream flash attention
whose output moves by one ulp (towards +inf) on every other call.

Not a planted line of the kernel: the defect is the call count, which a one-line source edit cannot
hold, so it wraps the upstream function (with its signature: `--kernel tests.planted.flash_rerun_ulp:flash_attention`).
Gradients are the upstream kernel's (the ulp is added outside the differentiated path).
"""

import itertools

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import flash_attention as upstream

_calls = itertools.count()  # the defect itself: state that outlives a call


def flash_attention(q, k, v, ab=None, segment_ids=None, **kw):
    out = upstream.flash_attention(q, k, v, ab, segment_ids, **kw)
    if next(_calls) % 2:
        out = _up_an_ulp(out)
    return out


def _up_an_ulp(out):
    """out moved one ulp towards +inf, outside the differentiated path (nextafter has no derivative)."""
    still = jax.lax.stop_gradient(out)
    return out + (jnp.nextafter(still, jnp.inf) - still)
