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
