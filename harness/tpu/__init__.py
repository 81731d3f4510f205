"""Tooling around the accelerator: native timing, benchmarks, ahead-of-time TPU compiles, cross-checks."""
