"""Fix for docs/findings/pallas_ragged_paged_empty_sequence.md, as a source edit of upstream ragged paged attention.

Every sequence's first K/V block is fetched ahead by whoever runs before it (`prefetch_first_kv_blk`, or
the previous sequence's last kv-loop step), and fetches are consumed only inside the kv loop. A sequence
with kv_len 0 runs no kv-loop step: its fetch is never waited for, and the next sequence's first block is
never fetched. The next sequence then waits on the same semaphore, which the stale fetch satisfies, and
computes with the empty sequence's page. The fix runs the kv loop at least once: for kv_len 0 that step
waits for its own fetch and fetches the next sequence's block, as any other sequence's last step does,
and stores nothing (its query range is empty: q_len <= kv_len = 0).

`--kernel pallas_ragged_paged=docs.findings.fixes.ragged_empty_sequence:ragged_paged_attention`.
"""

from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as upstream

from tests.planted._patch import patched

EDITS = [
    (
        "      return kv_blk_idx * num_kv_per_blk < kv_len\n",
        "      return kv_blk_idx * num_kv_per_blk < jnp.maximum(kv_len, 1)\n",
        None,
    )
]

_module = patched(upstream, "ragged_empty_sequence_fix", EDITS)
ragged_paged_attention = _module.ragged_paged_attention
