"""A leak, planted in the backward pass only: the upstream kernel's gradients, each kept in a list.

The forward pass is the upstream one and frees everything; only a call that runs the
backward pass leaves its gradients behind. A leak check that runs forward only misses it.
"""

import functools

import jax
from jax.experimental.pallas.ops.tpu import flash_attention as upstream

KEPT = []  # never cleared: the leak


def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes):
    call = functools.partial(
        upstream.flash_attention, segment_ids=segment_ids, causal=causal, sm_scale=sm_scale, block_sizes=block_sizes
    )

    @jax.custom_vjp
    def attend(q, k, v, ab):
        return call(q, k, v, ab)

    def fwd(q, k, v, ab):
        out, pullback = jax.vjp(call, q, k, v, ab)
        return out, pullback

    def bwd(pullback, dout):
        grads = pullback(dout)
        KEPT.append(grads)  # the leak: the gradients outlive the call
        return grads

    attend.defvjp(fwd, bwd)
    return attend(q, k, v, ab)
