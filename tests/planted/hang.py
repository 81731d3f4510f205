"""A kernel that never returns: a compiled XLA loop that never ends, before the real kernel.

The harness's per-case time limit must stop it and go on. The loop runs in compiled
code, where the main thread never returns to Python: a watchdog thread cannot stop it,
and a SIGALRM handler never runs (tried: `signal.alarm` does not interrupt it), so only
killing the process that runs it works.
"""

import jax
from jax.experimental.pallas.ops.tpu import flash_attention as upstream


def _forever(x):
    # c == c holds for every finite float, and c + 1 stays finite (it stalls at 2**24).
    return jax.lax.while_loop(lambda c: c == c, lambda c: c + 1.0, x * 0)


def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes):
    # stop_gradient: a while_loop has no reverse derivative, and the loop's value is never used.
    stall = _forever(jax.lax.stop_gradient(q[0, 0, 0, 0]).astype("float32"))
    q = q + (0 * stall).astype(q.dtype)
    return upstream.flash_attention(q, k, v, ab, segment_ids, causal=causal, sm_scale=sm_scale, block_sizes=block_sizes)
