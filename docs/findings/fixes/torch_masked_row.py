"""Fix for docs/findings/torch_cpu_flash_masked_row_backward.md: torch's CPU flash backward of a row whose every
key is masked by finfo.min is kv_len times its gradient.

The bug is C++ (torch's fused CPU attention, not in the wheel to patch): the saved logsumexp of such a row,
finfo.min + log(kv_len), rounds to finfo.min, and the backward's recomputed probabilities are 1 instead of
1/kv_len. No mask value avoids it (any fill large enough to make the row uniform in float32 also swallows
log(kv_len)); a corrected kernel keeps each row's maximum apart from its log-sum. The fix computes what that
kernel computes: the rows whose every key is masked take their value and gradient from the softmax as written
in torch operations (where the fill is added to the logits, their probabilities are 1/kv_len exactly, and
autograd gives the whole softmax gradient), the other rows from the kernel.

`fixed` and `unfixed` are the torch_cpu_flash adapter drawing cases whose masks go in as the finfo.min additive
form (the gradients of rows that see no key judged, their fill added to the logits, as the adapter declares),
around the call with and without that shift: `--kernel docs.findings.fixes.torch_masked_row:fixed`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from hypothesis import strategies as st

from harness.core.case import Case
from harness.core.masks import SHAPE_REQUIRED
from kernels import torch_cpu_flash as tcf

FINFO_MIN = tcf.MASK_FORMS.index("finfo_min")
# A shape component in every mask drawn (SHAPE_REQUIRED): every drawn case passes an attn_mask. No bias: the
# fix's rows take no gradient through the mask. Every dtype the adapter draws, so that the run names this finding
# on any dtype's failing case (harness.running.known); float16's finfo.min rows are convex, not judged.
CAPABILITIES = dataclasses.replace(
    tcf.CAPABILITIES,
    mask_components=tcf.CAPABILITIES.mask_components - {"bias"},
    restrictions=frozenset({SHAPE_REQUIRED}),
)


class FinfoMinMasks(tcf.TorchCPUFlash):
    """torch_cpu_flash with every mask the finfo.min additive form."""

    def __init__(self, name: str, fn: Any = None) -> None:
        super().__init__(name, fn=fn)
        self.capabilities = CAPABILITIES

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        alone = {"causal_mask": 1} if case.mask.components == {"causal_top_left"} and not case.bias else {}
        return super().block_strategy(case).map(lambda blocks: blocks | alone | {"mask_form": FINFO_MIN})


def _as_written(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, **kw: Any) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v in torch operations (k and v repeated to the query heads), in q's dtype."""
    if kw.get("enable_gqa") and k.shape[-3] != q.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    scale = kw.get("scale") or q.shape[-1] ** -0.5
    # In float32 at least, as the kernel accumulates: a 16-bit finfo.min plus a negative logit is -inf in 16 bits.
    wide = torch.promote_types(q.dtype, torch.float32)
    p = torch.softmax((q.to(wide) @ k.to(wide).transpose(-2, -1)) * scale + mask.to(wide), dim=-1)
    return (p @ v.to(wide)).to(q.dtype)


def _masked_rows_as_written(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
    mask = kw.get("attn_mask")
    if mask is None or not mask.is_floating_point():
        return tcf._flash(q, k, v, **kw)
    # A row that sees no key by a finite fill: every mask value at least half-way to finfo.min, none -inf (the
    # kernel gives a -inf row its declared zeros, value and gradient).
    hidden = ((mask <= torch.finfo(mask.dtype).min / 2) & mask.isfinite()).all(dim=-1, keepdim=True)
    if not hidden.any():
        return tcf._flash(q, k, v, **kw)
    # The kernel never sees those rows masked (its backward of them is wrong, NaN in 16 bits): they are ordinary
    # rows to it, and their value and gradient come from the softmax as written.
    out = tcf._flash(q, k, v, **(kw | {"attn_mask": mask.masked_fill(hidden, 0)}))
    rest = {key: value for key, value in kw.items() if key not in ("attn_mask", "is_causal")}
    return torch.where(hidden, _as_written(q, k, v, mask, **rest), out)


fixed = FinfoMinMasks(f"{__name__}:fixed", fn=_masked_rows_as_written)
unfixed = FinfoMinMasks(f"{__name__}:unfixed")
