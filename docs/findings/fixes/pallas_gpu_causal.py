"""Fix for docs/divergences/pallas_gpu_causal_q_longer_than_kv.md, as source edits of upstream mha.

Under causal the forward and dq loops run to the diagonal key tile, ceil((start_q + 1) * block_q /
block_k), which for q_len > kv_len lies past the last key tile. The fix clamps both loop bounds to
the number of key tiles (what the non-causal branch already uses since jax-ml/jax#24495).

`fixed` and `unfixed` are the pallas_gpu adapter with its causal_q_le_kv restriction lifted (the
restriction exists only for this finding), around the patched and the upstream mha:
`--kernel docs.findings.fixes.pallas_gpu_causal:fixed`.

Where the installed jax lacks jax.experimental.pallas.ops.gpu.attention (jax 0.12.1 removed it) this module
does not import, and its proof (docs/findings/fixes/prove.py) is "cannot run here".
"""

import dataclasses

from jax.experimental.pallas.ops.gpu import attention as upstream

from harness.core.masks import CAUSAL_Q_LE_KV
from kernels.pallas_gpu import PallasGpu
from tests.planted._patch import patched

EDITS = [
    (
        "upper_bound = lax.div(block_q * (start_q + 1) + block_k - 1, block_k)",
        "upper_bound = jnp.minimum(lax.div(block_q * (start_q + 1) + block_k - 1, block_k), pl.cdiv(seq_len, block_k))",
        None,
    ),
    (
        "upper_bound = pl.cdiv((start_q + 1) * block_q_dq, block_kv_dq)",
        "upper_bound = jnp.minimum(pl.cdiv((start_q + 1) * block_q_dq, block_kv_dq), pl.cdiv(kv_seq_len, block_kv_dq))",
        None,
    ),
]
_module = patched(upstream, "pallas_gpu_causal_fix", EDITS)


class CausalAnyLengths(PallasGpu):
    """pallas_gpu, drawing causal masks at any q_len and kv_len."""

    capabilities = dataclasses.replace(
        PallasGpu.capabilities, restrictions=PallasGpu.capabilities.restrictions - {CAUSAL_Q_LE_KV}
    )

    def violations(self, case):  # noqa: ANN001, ANN201 - the adapter's signature
        return [v for v in super().violations(case) if not v.startswith("causal with q_len=")]


fixed = CausalAnyLengths(_module.mha, name=f"{__name__}:fixed")
unfixed = CausalAnyLengths(upstream.mha, name=f"{__name__}:unfixed")
