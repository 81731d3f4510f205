"""PyTorch scaled_dot_product_attention on CPU, gradients from autograd.

An oracle independent of JAX: a different framework, compiler and softmax. It receives
the same dense mask as every oracle, built from the case's mask description.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.case import Case
from harness.contract import DENSE_ORACLE, Conventions, Implementation, Outputs, register
from harness.inputs import Inputs
from harness.torchvjp import repeat_kv, torch_outputs


class TorchSDPA(Implementation):
    name = "torch_sdpa"
    role = "oracle"
    framework = "torch"
    description = f"torch {torch.__version__} F.scaled_dot_product_attention on CPU"
    capabilities = DENSE_ORACLE
    conventions = Conventions(
        bias="QK^T * scale + attn_mask (float mask)",
        causal="is_causal is top-left; the adapter passes the dense mask instead",
        gqa="k/v heads repeated in the adapter (enable_gqa is torch>=2.5 only)",
        empty_rows="zeros",
        notes="a fully masked row gives 0 output and 0 gradient (torch>=2.5 safe softmax)",
    )

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
