"""Fix for docs/findings/pallas_splash_layout_compared_by_identity.md, as a source edit of upstream splash.

The dkv kernel counts its key sub-tiles with `k_layout is HEAD_DIM_MINOR`; every other layout test in
the module uses `==`. `QKVLayout` is an IntEnum made to be JSON serializable, so BlockSizes read back
from JSON hold plain ints, for which `is` is false: the kernel then loops head_dim // block_kv_compute
times (none at head_dim 64) and dk, dv come out zero. The fix is `==`.

`fixed` and `unfixed` are the pallas_splash adapter giving the kernel BlockSizes whose layouts are the
plain ints a JSON round trip gives back (the adapter itself passes QKVLayout members), around the
patched and the upstream factory: `--kernel docs.findings.fixes.splash_layout_identity:fixed`.
"""

import dataclasses

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream

from kernels.pallas_splash import PallasSplash
from tests.planted._patch import patched

EDITS = [("k_layout is HEAD_DIM_MINOR", "k_layout == HEAD_DIM_MINOR", None)]
_module = patched(upstream, "splash_layout_identity_fix", EDITS)


class LayoutsAsInts(PallasSplash):
    """pallas_splash, with BlockSizes' layouts as plain ints (as read back from JSON)."""

    def _block_sizes(self, case):  # noqa: ANN001, ANN202 - the adapter's signature
        sizes = super()._block_sizes(case)
        return dataclasses.replace(
            sizes, q_layout=int(sizes.q_layout), k_layout=int(sizes.k_layout), v_layout=int(sizes.v_layout)
        )


fixed = LayoutsAsInts(_module._make_splash_attention, name=f"{__name__}:fixed")
unfixed = LayoutsAsInts(upstream._make_splash_attention, name=f"{__name__}:unfixed")
