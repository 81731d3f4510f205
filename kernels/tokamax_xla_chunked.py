"""tokamax.dot_product_attention with implementation="xla_chunked" (kernels/_tokamax.py)."""

from __future__ import annotations

from kernels._tokamax import register_implementation

IMPLEMENTATION = "xla_chunked"

CASES = 16  # matrix budget: 15 smoke (extreme regimes in); 0.6-1.1 CPU s a case (benchmarks/results/matrix_budget.json)

register_implementation(IMPLEMENTATION, cases=CASES)
