"""Negative control for the batch-invariance check (harness.running.batch): jax.nn.dot_product_attention
whose output moves by one ulp (towards +inf) whenever the batch holds more than one row.

Like FlashMLA#212's 1-2 ulp of batch dependence (a tile size chosen by the batch size), too small for any
tolerance: only a bitwise comparison of a row alone with the same row in the batch shows it.
`--kernel jax_xla=tests.planted.xla_batch_ulp:dot_product_attention`.
"""

import jax
import jax.numpy as jnp


def dot_product_attention(query, key, value, bias=None, mask=None, **kw):
    out = jax.nn.dot_product_attention(query, key, value, bias, mask, **kw)
    if isinstance(out, tuple) or query.shape[0] == 1:  # [batch, seq, heads, head_dim]; the residual form as is
        return out
    return _up_an_ulp(out)


def _up_an_ulp(out):
    """out moved one ulp towards +inf, outside the differentiated path (nextafter has no derivative)."""
    still = jax.lax.stop_gradient(out)
    return out + (jnp.nextafter(still, jnp.inf) - still)
