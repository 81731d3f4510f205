"""Upstream's pure-JAX reference for ragged paged attention, with the kernel's signature.

`ref_ragged_paged_attention` takes every numeric argument of the kernel but the two block sizes
(it has no blocks). Run through the kernel's adapter as a drop-in
(`pallas_ragged_paged=tests.ragged_reference:ragged_paged_attention`), it checks on any host what
the interpreter cannot run: the adapter's packing, page pool, sliding window, soft cap and k/v
scales against the harness's truth.
"""

from __future__ import annotations

from typing import Any

from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as upstream


def ragged_paged_attention(
    *args: Any,
    num_kv_pages_per_block: int | None = None,
    num_queries_per_block: int | None = None,
    vmem_limit_bytes: int | None = None,
    **kwargs: Any,
) -> Any:
    # The block sizes only tile the kernel's loops; the reference computes the same numbers without tiles.
    del num_kv_pages_per_block, num_queries_per_block, vmem_limit_bytes
    return upstream.ref_ragged_paged_attention(*args, **kwargs)
