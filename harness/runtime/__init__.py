"""The runtime under the case model: devices and placement, the interpreters, library versions and
their shims, compilation caches, races between threads, and the instruction set XLA compiles for.

Nothing here knows a case or a kernel: `harness.core` (the case model, the contract, the reference)
builds on it.
"""
