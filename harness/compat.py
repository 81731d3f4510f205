"""Every place where a library version's API moved, handled once.

The rest of the harness calls these functions and never probes versions itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Iterator
from typing import Any


@functools.cache
def jax_platform() -> str:
    """The default JAX backend: "tpu", "gpu" or "cpu"."""
    import jax

    return jax.default_backend()


def has_tpu() -> bool:
    return jax_platform() == "tpu"


@contextlib.contextmanager
def enable_x64() -> Iterator[None]:
    """float64 inside the block only; the kernels under test never see it."""
    import jax

    if hasattr(jax, "enable_x64"):  # jax >= 0.7
        with jax.enable_x64(True):
            yield
    else:  # pragma: no cover - older jax
        from jax.experimental import enable_x64 as ctx

        with ctx():
            yield


@dataclasses.dataclass(frozen=True)
class InterpretOptions:
    """Checks the Pallas TPU interpreter can run alongside the kernel.

    detect_races: report data races between grid iterations.
    uninitialized_memory: "nan" poisons buffers the kernel reads before writing.
    random_seed: randomise the order of 'parallel' grid dimensions.
    """

    detect_races: bool = False
    uninitialized_memory: str = "nan"
    random_seed: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_current = InterpretOptions()


def set_interpret_options(options: InterpretOptions) -> None:
    global _current
    _current = options


def interpret_options() -> InterpretOptions:
    return _current


@contextlib.contextmanager
def tpu_kernel_context() -> Iterator[str]:
    """Run Pallas TPU kernels natively on a TPU, else under the TPU interpreter.

    Yields the backend name recorded with every result: "tpu" or "tpu_interpret".
    """
    if has_tpu():
        yield "tpu"
        return
    from jax.experimental.pallas import tpu as pltpu

    opts = interpret_options()
    params_cls = getattr(pltpu, "InterpretParams", None) or pltpu.TPUInterpretParams
    kwargs: dict[str, Any] = {"detect_races": opts.detect_races, "uninitialized_memory": opts.uninitialized_memory}
    if opts.random_seed is not None:
        kwargs["random_seed"] = opts.random_seed
    with pltpu.force_tpu_interpret_mode(params_cls(**kwargs)):
        yield "tpu_interpret"


def reset_tpu_interpreter() -> None:
    """Clear interpreter state (semaphores, buffers) left by a kernel that raised."""
    if has_tpu():
        return
    from jax.experimental.pallas import tpu as pltpu

    reset = getattr(pltpu, "reset_tpu_interpret_mode_state", None)
    if reset is not None:
        reset()


def races_found() -> bool:
    """Whether the last interpreted kernel run recorded a data race (needs detect_races)."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:  # pragma: no cover - layout differs in other jax versions
        return False
    return bool(getattr(ipc, "races", None) and getattr(ipc.races, "races_found", False))


def library_versions() -> dict[str, str | None]:
    """Versions of every library whose upgrade can change a result."""
    import importlib.metadata as md
    import platform

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "jax": version("jax"),
        "jaxlib": version("jaxlib"),
        "libtpu": version("libtpu") or version("libtpu-nightly"),
        "torch": version("torch"),
        "numpy": version("numpy"),
        "hypothesis": version("hypothesis"),
        "harness": version("attention-harness"),
    }


def default_platforms_env() -> None:
    """Keep JAX off a TPU plugin that has no TPU to find, unless the user chose platforms.

    With libtpu installed on a CPU host, JAX spends seconds probing for a TPU and
    prints initialisation errors; on a TPU host /dev/accel* or /dev/vfio exists.
    """
    if "JAX_PLATFORMS" in os.environ:
        return
    tpu_present = any(p.startswith("accel") for p in os.listdir("/dev")) or os.path.isdir("/dev/vfio")
    if not tpu_present:
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


def tpu_device_files() -> bool:
    """Whether this host has TPU device files (/dev/accel* or /dev/vfio); needs no jax."""
    return any(p.startswith("accel") for p in os.listdir("/dev")) or os.path.isdir("/dev/vfio")


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


def device_peak_bytes() -> int | None:
    """Peak device memory of the default device (an accelerator); None on CPU or when unreported."""
    import jax

    if jax_platform() == "cpu":
        return None
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return int(peak) if peak is not None else None
