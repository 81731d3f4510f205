"""Fix for docs/findings/torch_cpu_flash_float32_mask_float64.md: torch's CPU flash kernel with float64 inputs
and a float32 attn_mask.

The bug is C++ (`_scale_attn_mask_fusion_kernel` in aten/src/ATen/native/cpu/FlashAttentionKernel.cpp, not
in the wheel to patch): its vector loop steps by the float32 mask's lane count but loads, adds and stores one
float64 vector, half of it. The fix gives the kernel the mask in the query dtype, the one pairing of mask and
accumulation types that loop handles for float64, as a corrected kernel would convert it: the float32 mask
cast to float64 before the call (exact: every float32 is a float64).

`fixed` and `unfixed` are the torch_cpu_flash adapter drawing float64 cases whose masks always go in as a
float32 additive mask (mask_form "float32"; a shape component in every mask, so there always is one),
around the call with and without that cast: `--kernel docs.findings.fixes.torch_float32_mask:fixed`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from hypothesis import strategies as st

from harness.core.case import Case
from harness.core.masks import SHAPE_REQUIRED
from kernels import torch_cpu_flash as tcf

FLOAT32 = tcf.MASK_FORMS.index("float32")
# float64, every mask component torch_cpu_flash takes with a float32 mask (so that its failing cases are inside
# this contract and named by the note: no bias, which a float32 mask cannot carry in float64), and a shape
# component in every mask drawn (SHAPE_REQUIRED): every drawn case passes an attn_mask, top-left causal alone
# included (causal_mask), so every case meets the finding.
CAPABILITIES = dataclasses.replace(
    tcf.CAPABILITIES,
    dtypes=("float64",),
    mask_components=tcf.CAPABILITIES.mask_components - {"bias"},
    restrictions=frozenset({SHAPE_REQUIRED}),
)


class Float32Masks(tcf.TorchCPUFlash):
    """torch_cpu_flash in float64 with every mask a float32 additive mask."""

    def __init__(self, name: str, fn: Any = None) -> None:
        super().__init__(name, fn=fn)
        self.capabilities = CAPABILITIES

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        alone = {"causal_mask": 1} if case.mask.components == {"causal_top_left"} and not case.bias else {}
        return super().block_strategy(case).map(lambda blocks: blocks | alone | {"mask_form": FLOAT32})


def _cast_mask(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
    mask = kw.get("attn_mask")
    if mask is not None and mask.is_floating_point() and mask.dtype != q.dtype:
        kw["attn_mask"] = mask.to(q.dtype)
    return tcf._flash(q, k, v, **kw)


fixed = Float32Masks(f"{__name__}:fixed", fn=_cast_mask)
unfixed = Float32Masks(f"{__name__}:unfixed")
