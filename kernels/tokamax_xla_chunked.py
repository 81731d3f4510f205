"""tokamax.dot_product_attention with implementation="xla_chunked" (kernels/_tokamax.py)."""

from __future__ import annotations

from harness.core.contract import register
from kernels._tokamax import TokamaxAttention, available

IMPLEMENTATION = "xla_chunked"


if available(IMPLEMENTATION):
    register(TokamaxAttention(IMPLEMENTATION))
