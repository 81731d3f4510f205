"""Online-softmax rescaling bug: the running denominator is not rescaled when the row max grows.

`l_corr = alpha * l_prev` becomes `l_corr = l_prev` in the multi-step forward kernel. The
output and the saved logsumexp are wrong whenever a later key tile raises a row's max,
so only when the kernel walks more than one key tile (block_k < kv_len).
"""

from tests.planted._patch import patched_flash

_module = patched_flash(__name__.rsplit(".", 1)[-1], [("l_corr = alpha * l_prev", "l_corr = l_prev", [0])])
flash_attention = _module.flash_attention
