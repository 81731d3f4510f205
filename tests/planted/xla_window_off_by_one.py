"""Window bug in jax.nn.dot_product_attention: the local window's left edge is one key too far,
so local_window_size=(left, right) lets each query see left + 1 keys behind it.

One edit in `_get_window_mask` of a copy of jax's own module (jax._src.nn.functions). Exposes
`dot_product_attention` with the public signature:
`--kernel jax_xla=tests.planted.xla_window_off_by_one:dot_product_attention`.
"""

from jax._src.nn import functions as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
_OLD = "left_mask = query_pos[..., None] <= key_pos[..., None, :] + left_window\n"
_NEW = "left_mask = query_pos[..., None] <= key_pos[..., None, :] + left_window + 1\n"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
dot_product_attention = _module.dot_product_attention
