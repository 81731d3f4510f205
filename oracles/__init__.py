"""Oracles: reference implementations the kernels are checked against (one module each)."""
