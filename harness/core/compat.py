"""Every place where a library version's API moved, handled once.

The rest of the harness calls these functions and never probes versions itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
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


UNINITIALIZED_MEMORY: tuple[str, ...] = ("nan", "zero")
# The two ways a Pallas TPU kernel runs off a TPU (InterpretOptions.interpreter):
#   fast:     the Pallas HLO interpreter: the kernel discharged into plain XLA ops, one scan over the
#             grid in order (pallas_call(interpret=True)); ~20-60x cheaper on a reused program;
#   faithful: the TPU interpret mode (InterpretParams): simulated VMEM, DMAs and semaphores, the race
#             detector, uninitialised-memory poisoning, a random 'parallel' grid order.
INTERPRETERS: tuple[str, ...] = ("fast", "faithful")


@dataclasses.dataclass(frozen=True, kw_only=True)
class InterpretOptions:
    """Checks the Pallas TPU interpreter runs alongside the kernel (ignored on a real TPU).

    detect_races: the interpreter's happens-before race detector; a race fails the case.
    uninitialized_memory: "nan" poisons buffers the kernel reads before writing, so such a
      read shows as a non-finite output; "zero" hides it.
    random_seed: seed of the interpreter's random order of 'parallel' grid dimensions
      (None is the interpreter's default order, seed 0).
    check_grid_order: run each kernel case a second time with another grid order
      (random_seed + 1) and fail it unless the two results are exactly equal (NaN matching NaN).
    Out-of-bounds reads always raise under the interpreter, so they fail the case.
    interpreter: "faithful" (the TPU interpret mode, the one the options above configure) or
      "fast" (the HLO interpreter, which has none of those checks; INTERPRETERS). Options saved
      before the field existed read as "faithful": what they ran under.
    cores: TPU cores the faithful interpreter simulates (InterpretParams.num_cores_or_threads); a
      megacore grid needs 2 (docs/findings/pallas_paged_megacore_interpreter_hang.md).
    """

    detect_races: bool = False
    uninitialized_memory: str = "nan"
    random_seed: int | None = None
    check_grid_order: bool = False
    interpreter: str = "faithful"
    cores: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.detect_races, bool):
            raise ValueError(f"interpret detect_races={self.detect_races!r} must be true or false")
        if self.uninitialized_memory not in UNINITIALIZED_MEMORY:
            raise ValueError(
                f"interpret uninitialized_memory={self.uninitialized_memory!r} is not one of {UNINITIALIZED_MEMORY}"
            )
        seed = self.random_seed
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise ValueError(f"interpret random_seed={seed!r} must be a non-negative integer or null")
        if not isinstance(self.check_grid_order, bool):
            raise ValueError(f"interpret check_grid_order={self.check_grid_order!r} must be true or false")
        if self.interpreter not in INTERPRETERS:
            raise ValueError(f"interpret interpreter={self.interpreter!r} is not one of {INTERPRETERS}")
        if not isinstance(self.cores, int) or isinstance(self.cores, bool) or self.cores < 1:
            raise ValueError(f"interpret cores={self.cores!r} must be a positive integer")
        if self.interpreter == "fast" and self.checks:
            # The HLO interpreter runs the grid in order and has no race detector.
            raise ValueError("race detection and the grid-order check need interpreter='faithful', not 'fast'")

    @property
    def checks(self) -> bool:
        """Whether these options ask for a check only the faithful interpreter makes."""
        return self.detect_races or self.check_grid_order

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.cores == 1:  # written only when set: options saved before the field keep their JSON
            del out["cores"]
        return out

    @classmethod
    def from_json(cls, d: Any) -> InterpretOptions:
        """Strict: unknown fields are errors; missing ones take the defaults."""
        if not isinstance(d, dict):
            raise ValueError(f"interpret options must be a JSON object, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"interpret options have unknown fields {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)


# The options of the kernel call in progress. Callers pass options explicitly
# (harness.running.execute.execute(interpret=...)), which sets them for that call only; the Pallas
# adapters read them through tpu_kernel_context. A ContextVar, not a global: nothing
# outside the block that set them sees them.
DEFAULT_INTERPRET = InterpretOptions()
_interpret: contextvars.ContextVar[InterpretOptions] = contextvars.ContextVar(
    "interpret_options", default=DEFAULT_INTERPRET
)


def interpret_options() -> InterpretOptions:
    """The options of the kernel call in progress (the defaults outside any)."""
    return _interpret.get()


@contextlib.contextmanager
def using_interpret_options(options: InterpretOptions) -> Iterator[None]:
    """`options` inside the block, the previous ones after it."""
    token = _interpret.set(options)
    try:
        yield
    finally:
        _interpret.reset(token)


# Set by forced_interpret(): run Pallas TPU kernels under the interpreter even on a TPU host,
# for the interpreter-against-hardware check (harness.tpu.crosscheck). A ContextVar, not a global:
# it holds for the block that set it and nothing else.
_force_interpret: contextvars.ContextVar[bool] = contextvars.ContextVar("force_interpret", default=False)


@contextlib.contextmanager
def forced_interpret() -> Iterator[None]:
    """Inside the block, tpu_kernel_context interprets even where a TPU is attached."""
    token = _force_interpret.set(True)
    try:
        yield
    finally:
        _force_interpret.reset(token)


@contextlib.contextmanager
def tpu_kernel_context(random_seed: int | None = None) -> Iterator[str]:
    """Run Pallas TPU kernels natively on a TPU, else (or inside forced_interpret) under the
    interpreter the options name (InterpretOptions.interpreter).

    Yields the backend name recorded with every result: "tpu" or "tpu_interpret".
    random_seed overrides the options' grid-order seed (the grid-order check's second run).
    The interpreter parameters are part of jax's jit cache key (the config option
    pallas_tpu_interpret_mode_context_manager has include_in_jit_key=True), so changed
    options retrace the kernel; no cache needs clearing.
    """
    if has_tpu() and not _force_interpret.get():
        yield "tpu"
        return
    opts = interpret_options()
    if opts.interpreter == "fast":
        with hlo_interpret_mode():
            yield "tpu_interpret"
        return
    from jax.experimental.pallas import tpu as pltpu

    params_cls = getattr(pltpu, "InterpretParams", None) or pltpu.TPUInterpretParams
    kwargs: dict[str, Any] = {
        "detect_races": opts.detect_races,
        "uninitialized_memory": opts.uninitialized_memory,
        # The default already; explicit because an out-of-bounds read must fail the case.
        "out_of_bounds_reads": "raise",
    }
    seed = opts.random_seed if random_seed is None else random_seed
    if seed is not None:
        kwargs["random_seed"] = seed
    if opts.cores > 1:  # only when asked: older InterpretParams have no such field
        kwargs["num_cores_or_threads"] = opts.cores
    if opts.detect_races:
        _count_races()
    with pltpu.force_tpu_interpret_mode(params_cls(**kwargs)):
        yield "tpu_interpret"


# --- The HLO interpreter for every pallas_call in a block ---
# The TPU kernels call pl.pallas_call themselves and take no `interpret` argument, so the mode is
# set around them. How depends on the release; each way below is tried on a one-block kernel and
# the first under which the pallas_call it traces carries interpret=True is used (a probe, never a
# version check).


@contextlib.contextmanager
def _force_mode_true() -> Iterator[None]:
    # jax >= 0.7: force_tpu_interpret_mode passes its argument as every pallas_call's `interpret`,
    # and True (rather than InterpretParams) selects the HLO interpreter.
    from jax.experimental.pallas import tpu as pltpu

    with pltpu.force_tpu_interpret_mode(True):
        yield


@contextlib.contextmanager
def _config_true() -> Iterator[None]:
    # The config option force_tpu_interpret_mode sets, where the function is missing.
    from jax._src import config

    option = config.pallas_tpu_interpret_mode_context_manager
    previous = option.swap_local(True)
    try:
        yield
    finally:
        option.set_local(previous)


@contextlib.contextmanager
def _patched_default() -> Iterator[None]:
    # Older releases: pallas_call's own `interpret` argument, True by default inside the block.
    # Module state, restored on exit; the harness runs one kernel call at a time per process.
    from jax.experimental import pallas as pl

    original = pl.pallas_call

    @functools.wraps(original)
    def interpreted(*args: Any, **kwargs: Any) -> Any:
        kwargs["interpret"] = True
        return original(*args, **kwargs)

    pl.pallas_call = interpreted
    try:
        yield
    finally:
        pl.pallas_call = original


_HLO_MODES = (_force_mode_true, _config_true, _patched_default)


def _traced_interpret(mode: Callable[[], contextlib.AbstractContextManager[None]]) -> Any:
    """The `interpret` parameter of the pallas_call a one-block kernel traces to under `mode`."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def copy(x_ref: Any, o_ref: Any) -> None:
        o_ref[...] = x_ref[...] + 1.0

    def f(x: Any) -> Any:
        return pl.pallas_call(copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    with mode():
        jaxpr = jax.make_jaxpr(f)(jnp.zeros((8, 128), jnp.float32))
        out = f(jnp.zeros((8, 128), jnp.float32))  # it must also run, and compute
    if not bool((out == 1.0).all()):
        return None
    eqns = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "pallas_call"]
    return eqns[0].params.get("interpret") if eqns else None


@functools.cache
def _hlo_mode() -> Callable[[], contextlib.AbstractContextManager[None]] | None:
    for mode in _HLO_MODES:
        try:
            if _traced_interpret(mode) is True:
                return mode
        except Exception:  # noqa: BLE001, S112 - a way this release lacks; the next is tried
            continue
    return None


def hlo_interpreter() -> str | None:
    """Why the HLO interpreter cannot be forced on Pallas TPU kernels here, or None when it can."""
    if _hlo_mode() is None:
        return (
            "no way to run Pallas TPU kernels under the HLO interpreter on this jax: "
            + ", ".join(m.__name__ for m in _HLO_MODES)
            + " all failed the probe"
        )
    return None


@contextlib.contextmanager
def hlo_interpret_mode() -> Iterator[None]:
    """Every pallas_call traced in the block runs under the HLO interpreter (the "fast" interpreter)."""
    mode = _hlo_mode()
    if mode is None:
        raise RuntimeError(hlo_interpreter())
    with mode():
        yield


def reset_tpu_interpreter() -> None:
    """Clear interpreter state (semaphores, buffers) left by a kernel that raised.

    jax documents that after an exception in TPU interpret mode the shared state must be
    reset before the next interpreted kernel. Also on a TPU host, where a kernel may have run
    under forced_interpret.
    """
    from jax.experimental.pallas import tpu as pltpu

    reset = getattr(pltpu, "reset_tpu_interpret_mode_state", None)
    if reset is not None:
        reset()


# Races seen since the last clear_races(). The interpreter keeps one RaceDetectionState
# per pallas_call (interpret_pallas_call.races, replaced when the next kernel starts), so
# reading its flag after a forward and backward pass would only see the last kernel.
_races_seen = [0]


def _count_races() -> None:
    """Make every RaceDetectionState the interpreter creates report its races here."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    except ImportError:  # pragma: no cover - layout differs in other jax versions
        return
    base = ipc.RaceDetectionState
    if getattr(base, "_harness_counting", False):
        return

    class CountingRaceDetectionState(base):  # type: ignore[misc, valid-type]
        _harness_counting = True

        def __setattr__(self, name: str, value: Any) -> None:
            if name == "races_found" and value:
                _races_seen[0] += 1
            super().__setattr__(name, value)

    ipc.RaceDetectionState = CountingRaceDetectionState


def clear_races() -> None:
    _races_seen[0] = 0


def races_found() -> bool:
    """Whether an interpreted kernel reported a data race since clear_races() (needs detect_races)."""
    return _races_seen[0] > 0


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


# JAX's persistent compilation cache: where compiled programs are kept across runs. The
# references compile once per shape and dtype (harness.core.jaxvjp.compiled_outputs) and are read
# back from here by the next run. Programs with host callbacks (every kernel under the Pallas
# TPU interpreter) are never served from it: JAX keys them by their callbacks. "off" disables.
COMPILATION_CACHE_ENV = "ATTN_HARNESS_COMPILATION_CACHE"
COMPILATION_CACHE_MAX_BYTES = 2 * 2**30


def compilation_cache_dir() -> str | None:
    """$ATTN_HARNESS_COMPILATION_CACHE, else $XDG_CACHE_HOME (or ~/.cache)/attention-harness/jax; None when "off"."""
    chosen = os.environ.get(COMPILATION_CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("off", "") else chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "attention-harness", "jax")


def enable_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache (once; a directory set by the user is kept); returns it."""
    import jax

    path = jax.config.jax_compilation_cache_dir or compilation_cache_dir()
    if path is None or jax.config.jax_compilation_cache_dir == path:
        return path
    jax.config.update("jax_compilation_cache_dir", path)
    # The references compile in a fraction of a second, under JAX's default threshold of 1 s.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_compilation_cache_max_size", COMPILATION_CACHE_MAX_BYTES)
    # JAX decides once, at its first compilation, whether the cache is used: a program compiled
    # before this call (a kernel's cannot-run probe) would leave it off for the whole process.
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()
    return path


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
