"""jax.nn.dot_product_attention as kernels under test: implementation="xla" everywhere,
"cudnn" only where JAX's default backend is a GPU (the module registers it only there).

The XLA path materialises the logits and masks them with a finite large negative
number; cuDNN runs a fused flash-attention kernel. Both take the BTNH layout
([batch, seq, heads, head_dim]) and grouped k/v heads natively.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from harness import compat, placement
from harness import coverage as cov
from harness.case import DTYPES, Case
from harness.contract import Capabilities, Conventions, Implementation, Outputs, register
from harness.inputs import Inputs
from harness.jaxvjp import jax_outputs


def api(implementation: Literal["xla", "cudnn"]) -> cov.Api:
    """Every parameter of jax.nn.dot_product_attention, as this adapter drives it."""
    segments = implementation == "xla"  # cuDNN is declared without segments
    return cov.Api(
        name="jax.nn.dot_product_attention",
        locate=lambda: jax.nn.dot_product_attention,
        params=(
            cov.Param(name="query", drawn="[B, T, N, H] in the case dtype", exercised=cov.always),
            cov.Param(name="key", drawn="[B, S, K, H]; K divides N (GQA, MQA)", exercised=cov.always),
            cov.Param(name="value", drawn="[B, S, K, H]", exercised=cov.always),
            cov.Param(name="bias", drawn="float [B, N, T, S], or None", exercised=cov.has_bias),
            cov.Param(name="mask", drawn="boolean [B, 1, T, S] from segment ids", exercised=cov.component("segments"))
            if segments
            else cov.Param(name="mask", why="cuDNN is declared without segment ids, the only boolean mask drawn"),
            cov.Param(name="scale", drawn="1/sqrt(H), 1.0, 0.25, 0.03", exercised=cov.explicit_scale),
            cov.Param(name="is_causal", drawn="True, False", exercised=cov.causal_top_left),
            cov.Param(
                name="query_seq_lengths",
                why="not passed yet: valid query lengths are not in this kernel's capabilities (issue 11)",
            ),
            cov.Param(
                name="key_value_seq_lengths",
                why="not passed yet: valid key lengths are not in this kernel's capabilities (issue 11)",
            ),
            cov.Param(
                name="local_window_size",
                why="not passed yet: the case's windows (offsets, unbounded sides) are given to no native window",
            ),
            cov.Param(name="implementation", drawn=f'"{implementation}"', exercised=cov.always, why="one per kernel"),
            cov.Param(name="return_residual", why=cov.NO_RESIDUALS),
        ),
    )


class DotProductAttention(Implementation):
    role = "kernel"
    framework = "jax"

    def __init__(
        self, implementation: Literal["xla", "cudnn"], name: str, capabilities: Capabilities, conventions: Conventions
    ) -> None:
        self.implementation = implementation
        self.name = name
        self.capabilities = capabilities
        self.conventions = conventions
        self.api = (api(implementation),)
        self.description = f'jax.nn.dot_product_attention(implementation="{implementation}")'

    def backend(self) -> str:
        return compat.jax_platform()

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        mask = None
        if inputs.q_segment_ids is not None:
            # Segment ids go in as the boolean mask argument, [batch, 1, q_len, kv_len],
            # built here from the ids, not from the oracles' dense mask.
            q_ids, kv_ids = jnp.asarray(inputs.q_segment_ids), jnp.asarray(inputs.kv_segment_ids)
            mask = (q_ids[:, :, None] == kv_ids[:, None, :])[:, None]
        causal = case.mask.causal == "top_left"

        def f(q, k, v, *bias):
            q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))  # BNTH -> BTNH
            out = jax.nn.dot_product_attention(
                q,
                k,
                v,
                bias=bias[0] if bias else None,
                mask=mask,
                scale=case.sm_scale,
                is_causal=causal,
                implementation=self.implementation,
            )
            return jnp.swapaxes(out, 1, 2)

        return jax_outputs(f, inputs, grads=grads, device=placement.kernel_device())


XLA = DotProductAttention(
    "xla",
    "jax_xla",
    Capabilities(
        dtypes=DTYPES,
        head_dims=(64, 32, 80, 128, 256),
        # No tiles: lengths that are no multiple of anything, too.
        seq_lens=(16, 100, 128, 256),
        # is_causal is top-left (a tril mask); local_window_size has no offset and no
        # unbounded side, so the harness's windows are not declared.
        mask_components=frozenset({"causal_top_left", "segments", "bias"}),
        max_group=4,
    ),
    Conventions(
        bias="QK^T * scale + bias (logits in float32 for 16-bit inputs)",
        causal="top-left (is_causal builds tril(ones(T, S)))",
        gqa="native: key heads may divide query heads",
        empty_rows="uniform",
        notes="masked logits become a finite large negative number, so a row with no visible key averages all values",
    ),
)
register(XLA)

CUDNN = DotProductAttention(
    "cudnn",
    "jax_cudnn",
    Capabilities(
        # cuDNN's fused attention takes 16-bit inputs and head dims up to 128 (multiples of 8).
        dtypes=("bfloat16", "float16"),
        head_dims=(64, 128),
        seq_lens=(64, 128, 256),
        mask_components=frozenset({"causal_top_left", "bias"}),
        dbias=False,
    ),
    Conventions(
        bias="QK^T * scale + bias",
        causal="top-left",
        gqa="native",
        empty_rows="uniform",
        notes="declared masks leave no row without a visible key, so the empty-row value is never checked",
    ),
)
if compat.jax_platform() == "gpu":  # pragma: no cover - needs a GPU; untested on the CPU hosts
    register(CUDNN)
