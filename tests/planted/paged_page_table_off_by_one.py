"""Page-table bug in paged attention: each compute block reads its pages one table entry late.

The start of a block's run of page-table entries is off by one
(`b * pages_per_sequence + i * pages_per_compute_block + 1`), so a sequence's keys and values
come from the page its table lists next: the right data only if the table were the identity
(and never for the last page). The length mask is untouched. Exposes `paged_attention` with the
upstream signature, so the harness tests it with
`--kernel pallas_paged=tests.planted.paged_page_table_off_by_one:paged_attention`.
"""

from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
# Where a compute block's pages start in the flattened page table (one occurrence).
_OLD = "page_offset = b * pages_per_sequence + i * pages_per_compute_block"
_NEW = "page_offset = b * pages_per_sequence + i * pages_per_compute_block + 1"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
paged_attention = _module.paged_attention
