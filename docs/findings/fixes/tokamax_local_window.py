"""Fix for docs/findings/tokamax_local_window_unequal_lengths.md, as a source edit of tokamax's api.py.

`dot_product_attention(local_window_size=(before, after))` builds the per-query key range from the key
positions, `jnp.arange(key.shape[-3])`, where base.Mask's k_start / k_end are indexed by query row: the
array must have q_len entries. The fix takes the query positions, `jnp.arange(query.shape[-3])`.

`fixed` and `unfixed` are the tokamax_xla adapter passing every offset-0 window as local_window_size,
at any q_len and kv_len (the adapter passes unequal-length windows through the boolean mask, for this
finding), around the patched and the upstream function:
`--kernel docs.findings.fixes.tokamax_local_window:fixed`.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import tokamax
from tokamax._src.ops.attention import api as upstream

from harness.core.case import Case
from harness.core.masks import Mask, dense_mask
from kernels import _tokamax
from tests.planted._patch import patched

EDITS = [("k_indices = jnp.arange(key.shape[-3])", "k_indices = jnp.arange(query.shape[-3])", None)]
_module = patched(upstream, "tokamax_local_window_fix", EDITS)


def native_window(case: Case) -> tuple[tuple[int, int] | None, Any]:
    """_tokamax._split_mask with every offset-0 window as local_window_size, whatever the lengths."""
    window, local = case.mask.window, None
    if window is not None and window.offset == 0:
        local, window = (_tokamax._bound(window.left, case), _tokamax._bound(window.right, case)), None
    m = case.mask
    rest = Mask(window=window, chunk=m.chunk, block_sparse=m.block_sparse, segments=m.segments, heads=m.heads)
    if not rest.components:
        return local, None
    return local, dense_mask(rest, batch=case.batch, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len)


class NativeWindow(_tokamax.TokamaxAttention):
    """tokamax_xla, passing offset-0 windows as local_window_size at any q_len and kv_len."""

    def run(self, case, inputs, *, grads):  # noqa: ANN001, ANN201 - the adapter's signature
        with mock.patch.object(_tokamax, "_split_mask", native_window):
            return super().run(case, inputs, grads=grads)


fixed = NativeWindow("xla", _module.dot_product_attention, name=f"{__name__}:fixed")
unfixed = NativeWindow("xla", tokamax.dot_product_attention, name=f"{__name__}:unfixed")
