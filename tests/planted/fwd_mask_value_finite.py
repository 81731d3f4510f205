"""Extreme-value bug in flash attention: the mask value is a modest finite number (-5e4) instead of
-0.7 * float32's largest.

flashinfer-ai/flashinfer#4267: "-inf" was a finite sentinel, so rows whose logits lie below it came back
wrong. Here the mask is additive (s + mask_value), so a masked key loses only 5e4 of logit: under every
ordinary regime (logits of a few hundred at most) it still weighs exp(-5e4) = 0, and only a masked key
more than 5e4 above the visible ones (the "dominant" regime, harness.core.inputs) wins the softmax.
"""

from tests.planted._patch import patched_flash

_module = patched_flash(
    __name__.rsplit(".", 1)[-1],
    [
        (
            'DEFAULT_MASK_VALUE = -0.7 * float(jnp.finfo(jnp.dtype("float32")).max)',
            "DEFAULT_MASK_VALUE = -5e4",
            None,
        )
    ],
)
flash_attention = _module.flash_attention
