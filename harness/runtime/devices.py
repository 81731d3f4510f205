"""The platform JAX runs on, and the devices the harness asks about: which backend, TPU device files,
compile-only TPU topologies on a host without one, and what a compiled program or a device uses.

This module imports only the standard library at import time: the noxfile loads it before
anything is installed (tpu_device_files).
"""

from __future__ import annotations

import functools
import os
from typing import Any


@functools.cache
def jax_platform() -> str:
    """The default JAX backend: "tpu", "gpu" or "cpu"."""
    import jax

    return jax.default_backend()


def has_tpu() -> bool:
    return jax_platform() == "tpu"


def tpu_device_files() -> bool:
    """Whether this host has TPU device files (/dev/accel* or /dev/vfio); needs no jax."""
    return any(p.startswith("accel") for p in os.listdir("/dev")) or os.path.isdir("/dev/vfio")


def default_platforms_env() -> None:
    """Keep JAX off a TPU plugin that has no TPU to find, unless the user chose platforms.

    With libtpu installed on a CPU host, JAX spends seconds probing for a TPU and
    prints initialisation errors; on a TPU host /dev/accel* or /dev/vfio exists.
    """
    if "JAX_PLATFORMS" in os.environ:
        return
    if not tpu_device_files():
        os.environ["JAX_PLATFORMS"] = "cpu"


# --- Ahead-of-time TPU compilation on a host without a TPU (compile-only devices) ---

# libtpu reads these when it loads. On a CPU host it cannot discover an accelerator
# type or worker hostnames and logs initialisation errors, although compile-only
# topologies work; setting them quiets that. Never applied where a TPU is present.
# The accelerator type must be one every libtpu release accepts: libtpu 0.0.19 aborts
# on "v6e-1"; the topology compiled for is the one named, not this.
_COMPILE_ONLY_ENV = {
    "TPU_ACCELERATOR_TYPE": "v5litepod-1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_SKIP_MDS_QUERY": "1",
    # libtpu locks /tmp/libtpu_lockfile so that one process owns the TPU; compile-only use owns
    # none, and the compile checks run a child process beside a parent that may have loaded it.
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


def compile_only_env() -> None:
    """Prepare libtpu for compile-only topologies on a host with no TPU. Call before the first compile."""
    if tpu_device_files():
        return
    for key, value in _COMPILE_ONLY_ENV.items():
        os.environ.setdefault(key, value)


def tpu_compile_device(topology: str) -> Any:
    """The first device of a compile-only TPU topology such as "v5e:1x1" (needs libtpu, not a TPU).

    Raises RuntimeError naming the topology when libtpu is missing or rejects the name.
    """
    from jax.experimental import topologies

    compile_only_env()
    try:
        # Keywords: the positional order of get_topology_desc changed across jax releases.
        desc = topologies.get_topology_desc(platform="tpu", topology_name=topology)
    except Exception as e:  # libtpu raises XlaRuntimeError/ValueError/RuntimeError by version
        # libtpu <= 0.0.19 (jax 0.7.0) defaults to a 2x2x1 host and rejects a single chip unless
        # told the host holds one chip; later releases infer it.
        if "chips_per_host_bounds" not in str(e):
            raise RuntimeError(f"cannot build compile-only TPU topology {topology!r}: {type(e).__name__}: {e}") from e
        try:
            desc = topologies.get_topology_desc(platform="tpu", topology_name=topology, chips_per_host_bounds=(1, 1, 1))
        except Exception as e2:
            raise RuntimeError(
                f"cannot build compile-only TPU topology {topology!r}: {type(e2).__name__}: {e2}"
            ) from e2
    return desc.devices[0]


# --- What a compiled program, or the device, uses ---


def compiled_memory(compiled: Any) -> dict[str, int | None]:
    """memory_analysis() of a compiled executable as plain bytes."""
    stats = compiled.memory_analysis()
    if isinstance(stats, list | tuple):  # one entry per device in some releases
        stats = stats[0] if stats else None
    fields = {
        "argument": "argument_size_in_bytes",
        "output": "output_size_in_bytes",
        "temp": "temp_size_in_bytes",
        "generated_code": "generated_code_size_in_bytes",
        "alias": "alias_size_in_bytes",
    }
    return {k: (None if stats is None else getattr(stats, attr, None)) for k, attr in fields.items()}


def compiled_cost(compiled: Any) -> dict[str, float | None]:
    """cost_analysis() of a compiled executable: flops, bytes accessed, transcendentals, time estimate."""
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):  # jax < 0.4.36 returned one dict per device
        cost = cost[0] if cost else {}
    cost = cost or {}
    keys = {
        "flops": "flops",
        "bytes_accessed": "bytes accessed",
        "transcendentals": "transcendentals",
        "optimal_seconds": "optimal_seconds",
    }
    out = {k: (float(cost[src]) if src in cost else None) for k, src in keys.items()}
    # The TPU compiler reports a negative time (about -1 s) when it has no estimate.
    if out["optimal_seconds"] is not None and out["optimal_seconds"] < 0:
        out["optimal_seconds"] = None
    return out


def _device_memory_stat(key: str) -> int | None:
    import jax

    if jax_platform() == "cpu":
        return None
    stats = jax.devices()[0].memory_stats() or {}
    value = stats.get(key)
    return int(value) if value is not None else None


def device_peak_bytes() -> int | None:
    """Peak device memory of the default device (an accelerator); None on CPU or when unreported."""
    return _device_memory_stat("peak_bytes_in_use")


def device_bytes_in_use() -> int | None:
    """Device memory in use now on the default device (an accelerator); None on CPU or when unreported."""
    return _device_memory_stat("bytes_in_use")
