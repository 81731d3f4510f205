"""Backward-only bug: the dK/dV kernel's causal mask hides the diagonal; forward and dQ are right."""

from tests.planted._patch import patched_flash

# Occurrence 2 is the dkv kernel's causal mask (0, 1 forward; 3 dq; 4, 5 reference).
_module = patched_flash(
    __name__.rsplit(".", 1)[-1], [("causal_mask = col_ids <= row_ids", "causal_mask = col_ids < row_ids", [2])]
)
flash_attention = _module.flash_attention
