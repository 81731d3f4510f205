"""Fix for docs/findings/pallas_gpu_xla_backward_16bit.md, as a source edit of upstream Pallas GPU mha.

`_mha_backward(backward_pass_impl="xla")` pulls the cotangent (in the input dtype) back through
`mha_reference`, whose einsums return float32 (`preferred_element_type=jnp.float32`), and `jax.vjp`
rejects a 16-bit cotangent for a float32 output. The fix casts the reference's output to q.dtype.

`fixed` and `unfixed` are the pallas_gpu adapter with the xla backward in every case, at every dtype
(the adapter draws it now and then, for float32 only, for this finding), around the patched and the
upstream mha:
`--kernel docs.findings.fixes.pallas_gpu_xla_backward:fixed`.

Where the installed jax lacks jax.experimental.pallas.ops.gpu.attention (jax 0.12.1 removed it) this module
does not import, and its proof (docs/findings/fixes/prove.py) is "cannot run here".
"""

from jax.experimental.pallas.ops.gpu import attention as upstream

from kernels import pallas_gpu
from tests.planted._patch import patched

EDITS = [
    (
        "functools.partial(mha_reference, sm_scale=sm_scale, causal=causal),",
        "lambda *a: mha_reference(*a, sm_scale=sm_scale, causal=causal).astype(q.dtype),",
        None,
    )
]
_module = patched(upstream, "pallas_gpu_xla_backward_fix", EDITS)


class XlaBackwardAnyDtype(pallas_gpu.PallasGpu):
    """pallas_gpu with backward_pass_impl="xla" in every case, 16-bit inputs included."""

    def block_strategy(self, case):  # noqa: ANN001, ANN201 - the adapter's signature
        # The adapter's tiles and launch options, with the xla backward always on.
        return pallas_gpu._gpu_blocks(case).map(lambda blocks: {**blocks, pallas_gpu.BACKWARD_XLA: 1})

    def violations(self, case):  # noqa: ANN001, ANN201 - the adapter's signature
        return [v for v in super().violations(case) if not v.startswith("backward_xla with dtype=")]


fixed = XlaBackwardAnyDtype(_module.mha, name=f"{__name__}:fixed")
unfixed = XlaBackwardAnyDtype(upstream.mha, name=f"{__name__}:unfixed")
