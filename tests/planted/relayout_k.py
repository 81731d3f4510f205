"""Relayout: the forward kernel takes k transposed, [batch, heads, head_dim, kv_len], so the compiled
program copies all of k into the other layout before the kernel runs: a whole-tensor copy that no
kernel benchmark times and the answer does not show (the output is the upstream one).

Exact edits of upstream: k is passed transposed with its block spec transposed to match, and the
two forward kernels read the transposed tile back and take the kv block size from its last axis.
The backward kernels keep upstream's layout.
"""

from tests.planted._patch import patched_flash

_module = patched_flash(
    __name__.rsplit(".", 1)[-1],
    [
        (
            "  )(q, k, v, ab, q_segment_ids, kv_segment_ids)",
            "  )(q, jnp.swapaxes(k, 2, 3), v, ab, q_segment_ids, kv_segment_ids)",
            None,
        ),
        (
            "pl.BlockSpec((block_b, 1, block_k_major, head_dim), kv_index_map),\n      pl.BlockSpec(",
            "pl.BlockSpec((block_b, 1, head_dim, block_k_major),"
            " lambda *i: (*kv_index_map(*i)[:2], 0, kv_index_map(*i)[2])),\n      pl.BlockSpec(",
            None,
        ),
        ("block_k_major = k_tile_ref.shape[2]", "block_k_major = k_tile_ref.shape[3]", [0, 1]),
        (
            "k = k_tile_ref[\n          (*batch_idx, pl.dslice(start_k, block_k), slice(None))\n      ]",
            "k = k_tile_ref[\n          (*batch_idx, slice(None), pl.dslice(start_k, block_k))\n      ].T",
            None,
        ),
        (
            "k = k_tile_ref[batch_idx]  # [block_k, head_dim]",
            "k = k_tile_ref[batch_idx].T  # [block_k, head_dim]",
            None,
        ),
    ],
)
flash_attention = _module.flash_attention
