"""tokamax.dot_product_attention with implementation="mosaic" (kernels/_tokamax.py);
registered only where its hardware is (a TPU for mosaic, a GPU for triton and cudnn)."""

from __future__ import annotations

from kernels._tokamax import register_implementation

IMPLEMENTATION = "mosaic"

CASES = 8  # matrix budget: natively on a TPU: milliseconds a case

register_implementation(IMPLEMENTATION, cases=CASES)
