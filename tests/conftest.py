"""Shared fixtures. JAX must see JAX_PLATFORMS before it is imported: harness does that."""

import harness  # noqa: F401  (sets JAX_PLATFORMS=cpu where no TPU is attached)
