"""Subtle precision loss: the forward kernels round the float32 probabilities to bfloat16 before P @ V.

A "harmless" speed-up (bfloat16 operands for the MXU): each probability keeps 8 bits, so a
float32 case's output carries bfloat16 rounding averaged over the keys, an error only a few
times to a few tens of times the float32 bound. The fwd_qk_bfloat16 bug rounds the logits
instead and misses by hundreds of times; this one is the test of a tolerance that loosens.
"""

from tests.planted._patch import patched_flash

# Occurrences 0 and 1 are the forward kernels (multi-step, single-step).
_module = patched_flash(
    __name__.rsplit(".", 1)[-1],
    [
        (
            "p.astype(v.dtype), v, preferred_element_type=jnp.float32",
            "p.astype(jnp.bfloat16).astype(v.dtype), v, preferred_element_type=jnp.float32",
            [0, 1],
        )
    ],
)
flash_attention = _module.flash_attention
