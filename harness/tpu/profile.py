"""A `jax.profiler` trace of one kernel at one benchmark shape, with the harness's phases as named scopes.

Each job is traced on its own, into its own directory (the layout TensorBoard's profile plugin
and xprof read: DIR/plugins/profile/<time>/<host>.xplane.pb, with <host>.trace.json.gz beside
it, a Chrome trace that Perfetto opens). Inside the trace, one scope names the job
("pallas_flash fwd mha_f32_256") and holds the phases in order (PHASES: building the inputs,
compiling, one untimed call, the call itself), so a person finds the kernel's call under its
name. On a TPU the kernel runs natively and its custom call shows up by the name the program
outline records (harness.store.outline); on a CPU the Pallas TPU kernel runs under the
interpreter: the trace then shows the interpreter's work under the kernel's function
(`PjitFunction(flash_attention)`), which says where the harness spent its time, never how fast
the kernel is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.core.contract import Implementation
from harness.core.inputs import make_inputs
from harness.core.shapes import BenchShape
from harness.runtime import compat, placement

PHASES: tuple[str, ...] = ("inputs", "compile", "warmup", "call")
SCOPE = "harness"  # phase scopes are named "harness.<phase>"; no ":" (the profiler splits names there)
# The Python tracer records every Python call (measured: 425,000 events, 5 MB, for one interpreted
# flash forward at mha_f32_256); what a person looks for is the phases and the kernel, so it is off.
PYTHON_TRACER_LEVEL = 0
HOST_TRACER_LEVEL = 2
# The generation the kernel names are lowered for: a kernel's names do not depend on it.
NAMES_TOPOLOGY = "v5e:1x1"


@dataclasses.dataclass(kw_only=True)
class ProfileResult:
    """One kernel at one shape and pass, traced: where the trace is, or why there is none."""

    implementation: str
    shape: str
    pass_: str
    backend: str  # "tpu", "gpu", "cpu" or "tpu_interpret" (the Pallas TPU interpreter on CPU)
    trace_dir: str
    files: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    traceback: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def scope(self) -> str:
        """The name of the scope that holds the job's phases in the trace."""
        return f"{self.implementation} {self.pass_} {self.shape}"

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "pass": self.pass_, "scope": self.scope}


def trace_files(trace_dir: Path) -> list[Path]:
    """The trace files a profile wrote under `trace_dir` (the .xplane.pb and .trace.json.gz)."""
    found = Path(trace_dir).glob("plugins/profile/*/*")
    return sorted(p for p in found if p.name.endswith((".xplane.pb", ".trace.json.gz")))


def trace_events(path: Path) -> list[dict[str, Any]]:
    """The events of a `.trace.json.gz` (Chrome trace format)."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


@contextlib.contextmanager
def _phase(name: str, **meta: str) -> Iterator[None]:
    import jax

    with jax.profiler.TraceAnnotation(f"{SCOPE}.{name}", **meta):
        yield


def _options() -> Any:
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = PYTHON_TRACER_LEVEL
    options.host_tracer_level = HOST_TRACER_LEVEL
    return options


def mosaic_names(impl: Implementation, shape: BenchShape, pass_: str) -> list[str]:
    """The Mosaic kernels' names of `impl` lowered for a TPU (a compile-only v5e: no TPU needed), in
    program order; [] where it has none or libtpu is not installed. Put on the trace's scopes, so a
    search for the kernel's name finds its call in an interpreted trace too."""
    from jax.sharding import SingleDeviceSharding

    from harness.tpu import outline
    from harness.tpu.compile import abstract_args, with_backward

    f = impl.jax_fn(shape.case)
    if f is None or impl.backend() not in ("tpu", "tpu_interpret"):
        return []
    import jax

    try:
        args = abstract_args(shape.case, SingleDeviceSharding(compat.tpu_compile_device(NAMES_TOPOLOGY)))
        lowered = jax.jit(with_backward(f) if pass_ == "fwd_bwd" else f).lower(*args)
    except Exception:  # noqa: BLE001 - no libtpu, or a kernel this generation refuses: the trace has no names
        return []
    return list(dict.fromkeys(outline.kernel_names(lowered).values()))


def profile_one(impl: Implementation, shape: BenchShape, pass_: str, trace_dir: Path, *, backend: str) -> ProfileResult:
    """Trace one `pass_` ("fwd" or "fwd_bwd") of `impl` at `shape` into `trace_dir`; an error becomes
    a result with the error, never a raise (the trace of what ran before it is kept)."""
    import jax
    import jax.numpy as jnp

    from harness.tpu.compile import with_backward

    result = ProfileResult(
        implementation=impl.name, shape=shape.name, pass_=pass_, backend=backend, trace_dir=str(trace_dir)
    )
    start = time.perf_counter()
    meta = {"kernel": impl.name, "shape": shape.name, "pass": pass_, "backend": backend}
    names = mosaic_names(impl, shape, pass_)
    if names:
        meta["mosaic_kernels"] = ",".join(names)
    try:
        f = impl.jax_fn(shape.case)
        if f is None:
            raise TypeError(f"{impl.name} has no jax_fn: only JAX kernels are traced")
        device = placement.device_for(impl.role)
        uses_tpu_kernel = impl.backend() in ("tpu", "tpu_interpret")
        kernel_context = compat.tpu_kernel_context if uses_tpu_kernel else contextlib.nullcontext
        with jax.profiler.trace(str(trace_dir), profiler_options=_options()):
            with jax.profiler.TraceAnnotation(result.scope, **meta), placement.on(device), kernel_context():
                with _phase("inputs", **meta):
                    inputs = make_inputs(shape.case)
                    arrays = [inputs.q, inputs.k, inputs.v] + ([inputs.bias] if inputs.bias is not None else [])
                    args = jax.block_until_ready([jax.device_put(jnp.asarray(a), device) for a in arrays])
                with _phase("compile", **meta):
                    compiled = jax.jit(with_backward(f) if pass_ == "fwd_bwd" else f).lower(*args).compile()
                with _phase("warmup", **meta):
                    jax.block_until_ready(compiled(*args))
                with _phase("call", **meta):
                    jax.block_until_ready(compiled(*args))
    except Exception as e:  # a kernel that fails here is the run's to judge: the trace says how far it got
        result.error = f"{type(e).__name__}: {e}".splitlines()[0][:2000]
        result.traceback = traceback.format_exc()
    result.files = [str(p) for p in trace_files(trace_dir)]
    result.seconds = time.perf_counter() - start
    return result
