"""Precision-loss bug: the forward kernels cast q and k to bfloat16 before the QK^T product.

A "harmless" speed-up on a TPU: the logits of a float32 case carry bfloat16 rounding
(~4e-3 relative), far outside the float32 tolerance; a bfloat16 case is unaffected.
"""

from tests.planted._patch import patched_flash

# Occurrences 0 and 1 are the forward kernels (multi-step, single-step); 2 and 3 the backward.
_module = patched_flash(
    __name__.rsplit(".", 1)[-1],
    [
        (
            "q, k, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32",
            "q.astype(jnp.bfloat16), k.astype(jnp.bfloat16), TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32",
            [0, 1],
        )
    ],
)
flash_attention = _module.flash_attention
