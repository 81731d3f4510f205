"""Forward-pass bug: the causal mask hides the diagonal (`<` for `<=`) in the forward kernels only.

Every query loses the key at its own position; the first query sees no key at all.
"""

from tests.planted._patch import patched_flash

# Occurrences 0 and 1 are the two forward kernels (multi-step and single-step);
# 2 and 3 are the backward dkv and dq kernels, 4 and 5 the reference.
_module = patched_flash(
    __name__.rsplit(".", 1)[-1], [("causal_mask = col_ids <= row_ids", "causal_mask = col_ids < row_ids", [0, 1])]
)
flash_attention = _module.flash_attention
