"""The one way a PyTorch implementation turns inputs into Outputs: call, then autograd dout."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from harness.core.contract import Outputs
from harness.core.inputs import Inputs

TORCH_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}


def repeat_kv(t: torch.Tensor, group: int) -> torch.Tensor:
    """k or v [batch, kv_heads, len, dim] repeated to the query heads; autograd sums back."""
    return t if group == 1 else t.repeat_interleave(group, dim=1)


def _as64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).cpu().numpy()


def torch_outputs(
    f: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor],
    inputs: Inputs,
    dtype: str,
    *,
    grads: bool,
    device: str = "cpu",
) -> Outputs:
    """Run f(q, k, v, bias or None) on tensors of `dtype` and, with grads, autograd of inputs.dout."""
    dt = TORCH_DTYPES[dtype]

    def tensor(a: np.ndarray, grad: bool) -> torch.Tensor:
        # numpy has no bfloat16: go through float32, which holds every bf16/fp16 value exactly
        # (and float64 as itself).
        wide = np.float64 if dt == torch.float64 else np.float32
        return torch.from_numpy(np.asarray(a, wide)).to(device, dt).requires_grad_(grad)

    q, k, v = (tensor(a, grads) for a in (inputs.q, inputs.k, inputs.v))
    bias = None if inputs.bias is None else tensor(inputs.bias, grads)
    with torch.set_grad_enabled(grads):
        out = f(q, k, v, bias)
    if not grads:
        return Outputs(out=_as64(out))
    leaves = [q, k, v] + ([bias] if bias is not None else [])
    cots = torch.autograd.grad(out, leaves, grad_outputs=tensor(inputs.dout, False))
    return Outputs(
        out=_as64(out),
        dq=_as64(cots[0]),
        dk=_as64(cots[1]),
        dv=_as64(cots[2]),
        dbias=_as64(cots[3]) if bias is not None else None,
    )
