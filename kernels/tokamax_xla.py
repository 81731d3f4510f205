"""tokamax.dot_product_attention with implementation="xla" (kernels/_tokamax.py)."""

from __future__ import annotations

from kernels._tokamax import register_implementation

IMPLEMENTATION = "xla"

CASES = 18  # matrix budget: 16 smoke (extreme regimes in), 2 drawn (CPU s: benchmarks/results/matrix_budget.json)

register_implementation(IMPLEMENTATION, cases=CASES)
