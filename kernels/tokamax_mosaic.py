"""tokamax.dot_product_attention with implementation="mosaic" (kernels/_tokamax.py);
registered only where its hardware is (a TPU for mosaic, a GPU for triton and cudnn)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.contract import register
from kernels._tokamax import TokamaxAttention, available

IMPLEMENTATION = "mosaic"


def dropin(fn: Callable[..., Any], *, name: str) -> TokamaxAttention:
    """Test `fn`, a function with the tokamax.dot_product_attention signature, as this kernel."""
    return TokamaxAttention(IMPLEMENTATION, fn, name=name)


if available(IMPLEMENTATION):
    register(TokamaxAttention(IMPLEMENTATION))
