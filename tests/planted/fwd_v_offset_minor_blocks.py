"""Block-size-only bug: the forward kernel reads the first v sub-tile for every minor key step.

Inside a major key tile the kernel steps through minor tiles of block_k keys; this edit
drops the step's offset when slicing v. With block_k == block_k_major (one step per major
tile, every default block size) nothing changes; only block_k < block_k_major is wrong.
"""

from tests.planted._patch import patched_flash

_module = patched_flash(
    __name__.rsplit(".", 1)[-1],
    [
        (
            "v = v_tile_ref[(*batch_idx, pl.dslice(start_k, block_k), slice(None))]",
            "v = v_tile_ref[(*batch_idx, pl.dslice(0, block_k), slice(None))]",
            [0],
        )
    ],
)
flash_attention = _module.flash_attention
