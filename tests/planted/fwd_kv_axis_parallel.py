"""Grid-order bug: the forward kernel declares its key-tile axis 'parallel' instead of 'arbitrary'.

The key axis carries the online-softmax accumulator from one tile to the next, so its
order matters; marked 'parallel', a TPU may reorder or split it across cores. The
interpreter randomises 'parallel' axes, so the result depends on the grid-order seed
whenever there is more than one key tile (block_k_major < kv_len).
"""

from tests.planted._patch import patched_flash

# The forward pallas_call's semantics are indented 14 spaces; the backward ones 20.
_old = '"parallel",\n              "arbitrary",\n          )'
_module = patched_flash(__name__.rsplit(".", 1)[-1], [(_old, _old.replace('"arbitrary"', '"parallel"'), [0])])
flash_attention = _module.flash_attention
