"""The PR for docs/findings/pallas_splash_fully_masked_assert.md, as a source edit of upstream splash.

`_process_mask` shrinks the grid to the non-empty blocks when every head has the same mask; a mask that
hides every key leaves none, and a bare `assert current_block_mask.size > 0` stops the build. The edit
raises a ValueError that says what is wrong instead. `make_splash` is splash's factory with the edited
mask processing: `--kernel pallas_splash=docs.findings.fixes.splash_hidden_mask_error:make_splash`.
"""

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream_kernel
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask_info as upstream_info

from tests.planted._patch import patched

MESSAGE = (
    "the mask hides every key from every query"
    " (every head has the same mask, and no block of it is visible): splash attention needs at least"
    " one visible (query, key) pair; got"
)
EDITS = [
    (
        "      assert current_block_mask.size > 0\n",
        "      if current_block_mask.size == 0:\n"
        f"        raise ValueError(f{MESSAGE + ' {mask.shape=}, {q_seq_len_shard=}'!r})\n",
        None,
    )
]
mask_info = patched(upstream_info, "splash_hidden_mask_error_info", EDITS)
_kernel = patched(upstream_kernel, "splash_hidden_mask_error_kernel", [])
_kernel.mask_info_lib = mask_info
make_splash = _kernel._make_splash_attention
