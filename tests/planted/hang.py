"""A kernel that never returns: it blocks inside a jax host callback, in the middle of a computation.

The harness's per-case time limit must stop it and go on. The block sits inside the
compiled computation, where the main thread waits in C and no Python signal handler runs.
"""

import threading

import jax
from jax.experimental.pallas.ops.tpu import flash_attention as upstream

_never = threading.Event()


def _block_forever(x):
    _never.wait()
    return x


def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes):
    # stop_gradient: a callback has no derivative, and this one's value is never used.
    x = jax.lax.stop_gradient(q[0, 0, 0, 0])
    q = q + 0 * jax.pure_callback(_block_forever, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return upstream.flash_attention(q, k, v, ab, segment_ids, causal=causal, sm_scale=sm_scale, block_sizes=block_sizes)
