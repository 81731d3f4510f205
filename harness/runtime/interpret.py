"""Which Pallas interpreter runs a Pallas TPU kernel off a TPU, with which checks, in each release.

InterpretOptions names the interpreter and its checks; tpu_kernel_context sets the chosen one up
around a kernel call. The TPU interpret mode (the "faithful" interpreter) exists from jax 0.7.0
(pltpu.force_tpu_interpret_mode); the HLO interpreter (the "fast" one, pallas_call(interpret=True))
in every release, forced around kernels that take no `interpret` argument in whichever way the
release allows (probed, never a version check). What a release lacks is said by
faithful_interpreter() and hlo_interpreter(), so that a kernel is "cannot run here" for it, never
failed by it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from harness.runtime import devices


class InterpreterUnavailable(RuntimeError):
    """The installed jax lacks the interpreter asked for: the harness's gap, never the kernel's failure."""


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

    def under(self, interpreter: str | None) -> InterpretOptions:
        """These options under `interpreter` (the one a verdict ran on); unchanged for None (none ran)."""
        return self if interpreter is None else dataclasses.replace(self, interpreter=interpreter)

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


def _faithful_api() -> tuple[Callable[..., Any], type]:
    """force_tpu_interpret_mode and the interpreter's parameter class, as this release names them.

    Raises InterpreterUnavailable naming what is missing (jax < 0.7.0 has neither in
    jax.experimental.pallas.tpu; 0.7.0 names the class InterpretParams, a few releases before
    the rename TPUInterpretParams)."""
    from jax.experimental.pallas import tpu as pltpu

    force = getattr(pltpu, "force_tpu_interpret_mode", None)
    params = getattr(pltpu, "InterpretParams", None) or getattr(pltpu, "TPUInterpretParams", None)
    missing = [n for n, v in (("force_tpu_interpret_mode", force), ("InterpretParams", params)) if v is None]
    if missing:
        raise InterpreterUnavailable(
            f"the TPU interpret mode (interpreter='faithful') needs jax.experimental.pallas.tpu."
            f"{' and '.join(missing)}, which this jax lacks"
        )
    return force, params


# The InterpretParams field that sets the simulated cores, newest name first: jax 0.7.0 calls it
# num_cores_per_device, 0.8.3 num_cores_or_threads_per_device, 0.10.2 num_cores_or_threads.
CORES_FIELDS = ("num_cores_or_threads", "num_cores_or_threads_per_device", "num_cores_per_device")


def cores_field(params_cls: type) -> str:
    """The name under which `params_cls` (this release's InterpretParams) takes the simulated core
    count; InterpreterUnavailable where it takes none (the TPU interpret mode of jax 0.6.1 and before)."""
    fields = set(inspect.signature(params_cls).parameters)
    for name in CORES_FIELDS:
        if name in fields:
            return name
    raise InterpreterUnavailable(
        f"the TPU interpret mode of this jax simulates one core only ({params_cls.__name__} has none of "
        f"{', '.join(CORES_FIELDS)}): a megacore grid cannot run"
    )


def faithful_interpreter() -> str | None:
    """Why the TPU interpret mode (interpreter="faithful") cannot run here, or None when it can."""
    try:
        _faithful_api()
    except InterpreterUnavailable as e:
        return str(e)
    except ImportError as e:
        return f"jax.experimental.pallas.tpu does not import: {e}"
    return None


@contextlib.contextmanager
def tpu_kernel_context(random_seed: int | None = None) -> Iterator[str]:
    """Run Pallas TPU kernels natively on a TPU, else (or inside forced_interpret) under the
    interpreter the options name (InterpretOptions.interpreter).

    Yields the backend name recorded with every result: "tpu" or "tpu_interpret".
    random_seed overrides the options' grid-order seed (the grid-order check's second run).
    The interpreter parameters are part of jax's jit cache key (the config option
    pallas_tpu_interpret_mode_context_manager has include_in_jit_key=True), so changed
    options retrace the kernel; no cache needs clearing. Raises InterpreterUnavailable where
    this jax lacks the interpreter the options name.
    """
    if devices.has_tpu() and not _force_interpret.get():
        yield "tpu"
        return
    opts = interpret_options()
    if opts.interpreter == "fast":
        with hlo_interpret_mode():
            yield "tpu_interpret"
        return
    force, params_cls = _faithful_api()
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
        kwargs[cores_field(params_cls)] = opts.cores
    if opts.detect_races and "on_race" in inspect.signature(params_cls).parameters:
        # jax 0.12.1 raises at the first race by default ("RACE DETECTED" out of a callback, an opaque
        # JaxRuntimeError); warned, the race is flagged on the race state, which harness.runtime.races counts.
        kwargs["on_race"] = "warn"
    with force(params_cls(**kwargs)):
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
    eqns = [e for e in _equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
    return eqns[0].params.get("interpret") if eqns else None


def _equations(jaxpr: Any) -> Iterator[Any]:
    """Every equation of `jaxpr` and of the jaxprs inside it (jax 0.4.x wraps a pallas_call in a pjit)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            inner = value if hasattr(value, "eqns") else getattr(value, "jaxpr", None)
            if hasattr(inner, "eqns"):
                yield from _equations(inner)


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
        raise InterpreterUnavailable(hlo_interpreter())
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
