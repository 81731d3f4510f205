"""PyTorch scaled_dot_product_attention on CPU, gradients from autograd.

An oracle independent of JAX: a different framework, compiler and softmax. It receives
the same dense mask as every oracle, built from the case's mask description.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from harness.case import DTYPES, Case
from harness.contract import Capabilities, Conventions, Implementation, Outputs, register
from harness.inputs import Inputs
from harness.masks import MASK_COMPONENTS

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _tensor(a: np.ndarray, dtype: torch.dtype, grad: bool) -> torch.Tensor:
    # numpy has no bfloat16: go through float32, which holds every bf16/fp16 value exactly.
    t = torch.from_numpy(np.asarray(a, np.float32)).to(dtype)
    return t.requires_grad_(grad)


def _repeat_kv(t: torch.Tensor, group: int) -> torch.Tensor:
    return t if group == 1 else t.repeat_interleave(group, dim=1)


class TorchSDPA(Implementation):
    name = "torch_sdpa"
    role = "oracle"
    framework = "torch"
    description = f"torch {torch.__version__} F.scaled_dot_product_attention on CPU"
    capabilities = Capabilities(
        dtypes=DTYPES,
        head_dims=(32, 64, 80, 128, 256),
        seq_lens=(16, 64, 128, 256),
        # Every mask component: oracles read the dense mask (harness.masks.dense_mask).
        mask_components=frozenset(MASK_COMPONENTS | {"bias"}),
    )
    conventions = Conventions(
        bias="QK^T * scale + attn_mask (float mask)",
        causal="is_causal is top-left; the adapter passes the dense mask instead",
        gqa="k/v heads repeated in the adapter (enable_gqa is torch>=2.5 only)",
        empty_rows="zeros",
        notes="a fully masked row gives 0 output and 0 gradient (torch>=2.5 safe softmax)",
    )

    def violations(self, case: Case) -> list[str]:
        return [p for p in super().violations(case) if not p.startswith("head_dim")]

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        dt = TORCH_DTYPES[case.dtype]
        q, k, v = (_tensor(a, dt, grads) for a in (inputs.q, inputs.k, inputs.v))
        bias = None if inputs.bias is None else _tensor(inputs.bias, dt, grads)
        group = case.q_heads // case.kv_heads
        visible = torch.from_numpy(inputs.visible)
        if bias is not None:
            mask = bias.masked_fill(~visible, float("-inf"))
        elif bool(visible.all()):
            mask = None
        else:
            mask = visible
        with torch.set_grad_enabled(grads):
            out = F.scaled_dot_product_attention(
                q, _repeat_kv(k, group), _repeat_kv(v, group), attn_mask=mask, scale=case.sm_scale
            )
        as64 = lambda t: None if t is None else t.detach().to(torch.float64).numpy()  # noqa: E731
        if not grads:
            return Outputs(out=as64(out))
        dout = _tensor(inputs.dout, dt, False)
        leaves = [q, k, v] + ([bias] if bias is not None else [])
        cots = torch.autograd.grad(out, leaves, grad_outputs=dout)
        return Outputs(
            out=as64(out),
            dq=as64(cots[0]),
            dk=as64(cots[1]),
            dv=as64(cots[2]),
            dbias=as64(cots[3]) if bias is not None else None,
        )


register(TorchSDPA())
