"""Padding bug in jax.nn.dot_product_attention: key_value_seq_lengths is accepted and ignored,
so every query also attends to the padding keys past its row's valid length.

One edit in `_get_padding_mask_logits` of a copy of jax's own module (jax._src.nn.functions).
Exposes `dot_product_attention` with the public signature:
`--kernel jax_xla=tests.planted.xla_ignores_kv_lengths:dot_product_attention`.
"""

from jax._src.nn import functions as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
_OLD = "kv_mask = kv_indices < kv_seqlen[:, None, None]\n"
_NEW = "kv_mask = kv_indices >= 0\n"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
dot_product_attention = _module.dot_product_attention
