"""PyTorch scaled_dot_product_attention on CPU, gradients from autograd.

An oracle independent of JAX: a different framework, compiler and softmax. It receives
the same dense mask as every oracle, built from the case's mask description.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from harness.core import coverage as cov
from harness.core import extended
from harness.core.case import REGIMES, Case
from harness.core.contract import DENSE_ORACLE, About, Conventions, Implementation, Outputs, register
from harness.core.inputs import Inputs
from harness.core.torchvjp import repeat_kv, torch_outputs

API = (
    cov.Api(
        name="torch.nn.functional.scaled_dot_product_attention",
        locate=lambda: F.scaled_dot_product_attention,
        params=(
            cov.Param(name="query", drawn="[B, N, T, H] in the case dtype, on CPU", exercised=cov.always),
            cov.Param(name="key", drawn="[B, N, S, H] (k/v heads repeated)", exercised=cov.always),
            cov.Param(name="value", drawn="[B, N, S, H]", exercised=cov.always),
            cov.Param(
                name="attn_mask",
                drawn="the dense boolean mask, or the bias with -inf where masked",
                exercised=lambda case: case.bias or bool(case.mask.components),
            ),
            cov.Param(name="dropout_p", why="random: no deterministic truth to compare with"),
            cov.Param(name="is_causal", why="the adapter passes the dense mask instead: one path for every component"),
            cov.Param(name="scale", drawn="1/sqrt(H), 1.0, 0.25, 0.03", exercised=cov.explicit_scale),
            cov.Param(name="enable_gqa", why="the adapter repeats k/v heads (enable_gqa is torch >= 2.5 only)"),
        ),
    ),
)


class TorchSDPA(Implementation):
    name = "torch_sdpa"
    role = "oracle"
    framework = "torch"
    description = f"torch {torch.__version__} F.scaled_dot_product_attention on CPU"
    about = About(
        summary="torch SDPA on the CPU (its default backend there: flash attention, every dtype)",
        source="torch/nn/functional.py: scaled_dot_product_attention",
    )
    capabilities = dataclasses.replace(
        DENSE_ORACLE,
        dtypes=extended.with_float64(DENSE_ORACLE.dtypes),
        # F.scaled_dot_product_attention has no logits soft cap, no sinks and returns no
        # logsumexp: cases with a cap or sinks are outside its contract (violations), and it sits
        # them out; on residual cases its output is checked and no residual.
        soft_cap=False,
        sinks=False,
        residuals=False,
        # Not the offset regime: its CPU backward loses float32 precision on rows ~1e5 from zero
        # (docs/findings/torch_sdpa_cpu_flash_lse_large_logits.md): there it would judge nothing.
        regimes=tuple(r for r in REGIMES if r != "offset"),
    )
    conventions = Conventions(
        bias="QK^T * scale + attn_mask (float mask)",
        causal="is_causal is top-left; the adapter passes the dense mask instead",
        gqa="k/v heads repeated in the adapter (enable_gqa is torch>=2.5 only)",
        empty_rows="zeros",
        notes="a fully masked row gives 0 output and 0 gradient (torch>=2.5 safe softmax)",
    )
    api = API

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        group = case.q_heads // case.kv_heads
        visible = torch.from_numpy(inputs.visible)

        def f(q, k, v, bias):
            if bias is not None:
                mask = bias.masked_fill(~visible, float("-inf"))
            else:
                mask = None if bool(visible.all()) else visible
            return F.scaled_dot_product_attention(
                q, repeat_kv(k, group), repeat_kv(v, group), attn_mask=mask, scale=case.sm_scale
            )

        return torch_outputs(f, inputs, case.dtype, grads=grads)


register(TorchSDPA())
