"""tokamax.dot_product_attention with implementation="triton" (kernels/_tokamax.py);
registered only where its hardware is (a GPU for triton and cudnn)."""

from __future__ import annotations

from kernels._tokamax import register_implementation

IMPLEMENTATION = "triton"

CASES = 8  # matrix budget: natively on a GPU: milliseconds a case

register_implementation(IMPLEMENTATION, cases=CASES)
