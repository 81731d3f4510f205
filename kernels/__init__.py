"""Kernels under test: one adapter module each, registered with harness.core.contract.register."""
