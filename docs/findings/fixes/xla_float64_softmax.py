"""Fix for docs/findings/jax_xla_float64_softmax_in_float32.md, as a source edit of jax/_src/nn/functions.py.

`_dot_product_attention_core` casts the logits to float32 before the softmax ("always carried out in
fp32"): an upcast for 16-bit inputs, a downcast for float64. The fix casts to
promote_types(logits dtype, float32), which the logsumexp residual shares.

`fixed` and `unfixed` are the jax_xla adapter drawing float64 cases only (it draws float64 only where
the installed jax computes it in float64, which 0.10.2 does not), around the patched and the upstream
jax.nn.dot_product_attention: `--kernel docs.findings.fixes.xla_float64_softmax:fixed`.
"""

import dataclasses

import jax
from jax._src.nn import functions as upstream

from harness.core.case import FLOAT64
from kernels import xla_attention as xa
from tests.planted._patch import patched

EDITS = [
    (
        "padded_logits = padded_logits.astype(np.float32)",
        "padded_logits = padded_logits.astype(dtypes.promote_types(padded_logits.dtype, np.float32))",
        None,
    )
]
_module = patched(upstream, "xla_float64_softmax_fix", EDITS)
# float64 alone: every case of a run meets the finding, and the rest of jax_xla's contract is its own run's.
CAPABILITIES = dataclasses.replace(xa.XLA_CAPABILITIES, dtypes=(FLOAT64,))


class DrawsFloat64(xa.DotProductAttention):
    """jax_xla in float64, whatever the installed jax does with it."""

    def violations(self, case):  # noqa: ANN001, ANN201 - the adapter's signature
        return [v for v in super().violations(case) if not v.startswith("float64: this jax computes")]


fixed = DrawsFloat64(
    "xla", f"{__name__}:fixed", CAPABILITIES, xa.XLA_CONVENTIONS, xa.XLA_ABOUT, fn=_module.dot_product_attention
)
unfixed = DrawsFloat64(
    "xla", f"{__name__}:unfixed", CAPABILITIES, xa.XLA_CONVENTIONS, xa.XLA_ABOUT, fn=jax.nn.dot_product_attention
)
