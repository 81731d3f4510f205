"""A leak, planted: the upstream kernel, but every output is kept in a module-level list.

Each call looks correct; only memory in use grows, one output array a call: the kind of
leak that showed up weeks later as a cost spike. `python -m harness leak` must catch it.
"""

from jax.experimental.pallas.ops.tpu import flash_attention as upstream

KEPT = []  # never cleared: the leak


def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes):
    out = upstream.flash_attention(q, k, v, ab, segment_ids, causal=causal, sm_scale=sm_scale, block_sizes=block_sizes)
    KEPT.append(out)
    return out
