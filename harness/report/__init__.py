"""Regression reports rendered from results records, and the sides of a baseline comparison.

Pipeline: `records.load` (files -> Records) -> `data.build` (Records -> Report, pure)
-> `render.write` (Report -> one self-contained HTML file). `compose.sides` picks the baseline
and candidate runs a comparison uses; harness.gate judges them, `compose.make` does it all.
"""
