"""Kernels under test: one adapter module each, registered with harness.contract.register."""
