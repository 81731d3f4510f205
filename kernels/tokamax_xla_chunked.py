"""tokamax.dot_product_attention with implementation="xla_chunked" (kernels/_tokamax.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.contract import register
from kernels._tokamax import TokamaxAttention, available

IMPLEMENTATION = "xla_chunked"


def dropin(fn: Callable[..., Any], *, name: str) -> TokamaxAttention:
    """Test `fn`, a function with the tokamax.dot_product_attention signature, as this kernel."""
    return TokamaxAttention(IMPLEMENTATION, fn, name=name)


if available(IMPLEMENTATION):
    register(TokamaxAttention(IMPLEMENTATION))
