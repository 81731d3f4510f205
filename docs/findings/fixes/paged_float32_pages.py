"""Fix for docs/findings/pallas_paged_float32_pages_bf16.md, as a source edit of upstream paged attention.

`MultiPageAsyncCopyDescriptor.wait_and_get_loaded` loads the pages as float32, then calls
`_maybe_dequantize(x, x_scale)` with its default dtype=bfloat16, which for plain pages is
`x.astype(bfloat16)`: float32 pages are rounded to bfloat16 before the float32 matmuls. The fix passes
the pages' own dtype for plain pages (int8 pages keep the default, whose arithmetic is float32 anyway):
bfloat16 pages are unchanged, float32 pages stay float32.

`fixed` and `unfixed` are the pallas_paged adapter drawing float32 with plain pages (it draws float32
only with int8 pages, for this finding), around the patched and the upstream paged_attention:
`--kernel docs.findings.fixes.paged_float32_pages:fixed`.
"""

import dataclasses

from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as upstream

from kernels.pallas_paged import PallasPaged
from tests.planted._patch import patched

EDITS = [
    (
        "jax_array = self._maybe_dequantize(jax_array, scales_jax_array)",
        "jax_array = self._maybe_dequantize(jax_array, scales_jax_array, **(\n"
        "        {} if scales_jax_array is not None else {'dtype': self._vmem_buffer.dtype}))",
        None,
    )
]
_module = patched(upstream, "paged_float32_pages_fix", EDITS)


class PlainFloat32Pages(PallasPaged):
    """pallas_paged, drawing float32 with plain pages too."""

    capabilities = dataclasses.replace(PallasPaged.capabilities, kv_format_only_dtypes=())


fixed = PlainFloat32Pages(_module.paged_attention, name=f"{__name__}:fixed")
unfixed = PlainFloat32Pages(upstream.paged_attention, name=f"{__name__}:unfixed")
