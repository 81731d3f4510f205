"""The one way a PyTorch implementation turns inputs into Outputs (call, then autograd dout), and how its probes
read what the installed release writes on a row that sees no key."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from harness.core.contract import EmptyRows, Outputs
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


def classify_empty_row(row: np.ndarray, values: np.ndarray) -> EmptyRows:
    """The EmptyRows name of one output row of a query that sees no key, given the value rows it could average:
    how a torch implementation's probe reads the convention of the installed release."""
    if np.isnan(row).all():
        return "nan"
    if not np.isfinite(row).all():
        raise RuntimeError(f"a row with no visible key came out partly non-finite: {row}")
    spread = max(float(np.abs(values).max()), 1.0)
    if np.abs(row).max() <= 1e-6 * spread:
        return "zeros"
    if np.abs(row - values.mean(axis=0)).max() <= 1e-2 * spread:
        return "uniform"
    inside = (row >= values.min(axis=0) - 1e-2 * spread) & (row <= values.max(axis=0) + 1e-2 * spread)
    if not inside.all():
        raise RuntimeError(f"a row with no visible key is outside the values' range: {row}")
    return "convex"


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
