"""Negative control for the per-quantity batch-invariance check (harness.running.exactness): upstream
flash attention whose output moves by one ulp (towards +inf) per batch row beyond the first.

Within every tolerance, and on `out` alone, which upstream keeps the same bits in a batch and alone
(its dq and dk move by an ulp there: docs/findings/pallas_flash_dq_batch_dependent.md): a check that
held every quantity to the tolerance because one of them varies upstream would pass it. Not a planted
line of the kernel (the defect is the batch size around it), so it wraps the upstream function with its
signature: `--kernel tests.planted.flash_batch_ulp:flash_attention`. Gradients are upstream's.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import flash_attention as upstream


def flash_attention(q, k, v, ab=None, segment_ids=None, **kw):
    out = upstream.flash_attention(q, k, v, ab, segment_ids, **kw)
    still = jax.lax.stop_gradient(out)  # outside the differentiated path (nextafter has no derivative)
    return out + (q.shape[0] - 1) * (jnp.nextafter(still, jnp.inf) - still)  # q: [batch, heads, q_len, head_dim]
