"""Where each side of a comparison runs: kernels on the accelerator, references on the CPU.

The float64 truth, the same-dtype ruler and the oracles are the yardstick every kernel is
measured by. On a TPU host JAX's default device is the TPU, where float64 is emulated and a
float32 matmul defaults to bfloat16 passes; on a GPU host TF32 may stand in for float32. A
ruler computed there would be coarser than the CPU's, and every tolerance derived from it
looser. So references always run on the CPU backend, whatever the default device is, and
kernels run on the default device (the accelerator when one is attached). Inputs are made
once on the host (numpy) and placed explicitly on one side or the other.

jaxlib always has a CPU backend, but JAX_PLATFORMS=tpu hides it: `reference_device` then
fails with a message saying to add cpu to JAX_PLATFORMS, rather than measure on the TPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

Role = str  # "kernel" or "oracle" (harness.core.contract.Role)


def reference_device() -> Any:
    """The device every reference computation runs on: the first device of the CPU backend."""
    import jax

    try:
        return jax.devices("cpu")[0]
    except RuntimeError as e:
        raise RuntimeError(
            "the references (float64 truth, ruler, oracles) must run on the CPU backend, which JAX "
            f"does not expose here ({e}); add cpu to JAX_PLATFORMS, e.g. JAX_PLATFORMS=tpu,cpu"
        ) from e


def kernel_device() -> Any:
    """The device kernels under test run on: the configured default device, else the default
    backend's first device (the accelerator when one is attached)."""
    import jax

    chosen = jax.config.jax_default_device
    if chosen is not None and not isinstance(chosen, str):
        return chosen
    return jax.devices(chosen)[0] if isinstance(chosen, str) else jax.devices()[0]


def device_for(role: Role) -> Any:
    """The device an implementation of `role` computes on."""
    return kernel_device() if role == "kernel" else reference_device()


def describe(device: Any) -> str:
    """A device as records show it, e.g. "cpu:0" or "tpu:0 (TPU v5 lite)"."""
    kind = getattr(device, "device_kind", "") or ""
    name = f"{device.platform}:{device.id}"
    return name if not kind or kind.lower() == device.platform else f"{name} ({kind})"


@contextlib.contextmanager
def on(device: Any) -> Iterator[None]:
    """Arrays created inside the block without an explicit device (constants, masks built while
    tracing) land on `device`; explicitly placed arguments decide where computations run."""
    import jax

    with jax.default_device(device):
        yield
