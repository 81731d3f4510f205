"""tokamax.dot_product_attention with implementation="triton" (kernels/_tokamax.py);
registered only where its hardware is (a TPU for mosaic, a GPU for triton and cudnn)."""

from __future__ import annotations

from harness.core.contract import register
from kernels._tokamax import TokamaxAttention, available

IMPLEMENTATION = "triton"


if available(IMPLEMENTATION):
    register(TokamaxAttention(IMPLEMENTATION))
