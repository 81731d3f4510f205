"""Ragged-length bug in ragged paged attention: the causal diagonal of each sequence is one key late.

The row position of the kernel's causal mask starts at `kv_len - q_len + 1` instead of
`kv_len - q_len`, so every query also sees the key just after it (and a decode query a key
past the sequence's length). Exposes `ragged_paged_attention` with the upstream signature:
`--kernel pallas_ragged_paged=tests.planted.ragged_kv_len_off_by_one:ragged_paged_attention`.
"""

from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
# The kernel body's causal row offset (upstream's reference spells its own differently).
_OLD = "          (kv_len - q_len)\n          + q_len_start"
_NEW = "          (kv_len - q_len + 1)\n          + q_len_start"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
ragged_paged_attention = _module.ragged_paged_attention
