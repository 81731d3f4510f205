"""Speed benchmarks: what each timed call runs, and pytest-benchmark JSON turned into records.

The benchmarks themselves are pytest-benchmark tests in benchmarks/ (pedantic mode, one
call per round); `python -m harness bench` runs them and converts the JSON here into
kind "bench" records (harness.store.records.BenchRecord).

A timing carries the backend it ran on. Under "tpu_interpret" the Pallas kernel is
simulated on CPU, so its timing measures the interpreter and the harness, not the kernel;
"tpu" timings measure the kernel. The two must never be compared: `comparable` is the
one test for whether two bench records may be set side by side.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Callable
from typing import Any

from harness.core.case import Case
from harness.core.contract import Implementation
from harness.core.inputs import make_inputs
from harness.runtime import compat, placement
from harness.store.records import BenchRecord, now

# Timed calls per benchmark in one process; the process's median is its one sample for the gate
# and the report (harness.gate.process_samples): calls inside one process are not independent
# samples, so what steadies a verdict is more processes (bench several times, as `upgrade
# --bench-rounds` does), not more calls. Natively a call takes microseconds to milliseconds and more
# calls steady that process's median; under the interpreter a call takes up to seconds.
ROUNDS = {"tpu": 50, "gpu": 50, "cpu": 3, "tpu_interpret": 3}
# Untimed calls first: the first traces and compiles. On the CPU the first timed call after a single
# warm-up ran at a median 1.06x (up to 1.65x) its process's median (measured over 32 benchmarks of
# the default upgrade, 4 processes each), so the CPU's fast calls warm up twice more.
WARMUP_ROUNDS = {"cpu": 3}
WARMUP_DEFAULT = 1


def warmup_rounds(backend: str) -> int:
    return WARMUP_ROUNDS.get(backend, WARMUP_DEFAULT)


BENCH_NOTE = {
    "tpu_interpret": "Pallas TPU interpreter on CPU: measures the interpreter and harness, not the kernel; "
    "never compare with native tpu timings",
    "tpu": "native TPU: measures the kernel",
}


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def timed_call(impl: Implementation, case: Case, pass_: str) -> Callable[[], Any]:
    """A zero-argument function running one `pass_` ("fwd" or "fwd_bwd") of `impl` on `case`
    and returning only once the result is computed (block_until_ready for JAX).

    A JAX implementation's jax_fn is jitted (with its backward via jax.vjp); the Pallas kernel
    is traced under compat.tpu_kernel_context so it runs natively or under the interpreter.
    Others (torch) are timed through `run`, which includes converting outputs to numpy.
    """
    import jax
    import jax.numpy as jnp

    from harness.tpu.compile import with_backward

    inputs = make_inputs(case)
    grads = pass_ == "fwd_bwd"
    f = impl.jax_fn(case)
    if f is None:
        return lambda: impl.run(case, inputs, grads=grads)
    # Kernels on the kernel device, oracles on the CPU (harness.runtime.placement), as in a run.
    device = placement.device_for(impl.role)
    args = [jax.device_put(jnp.asarray(a), device) for a in (inputs.q, inputs.k, inputs.v)]
    if inputs.bias is not None:
        args.append(jax.device_put(jnp.asarray(inputs.bias), device))
    fn = jax.jit(with_backward(f) if grads else f)
    uses_tpu_kernel = impl.backend() in ("tpu", "tpu_interpret")

    def call() -> Any:
        kernel_context = compat.tpu_kernel_context() if uses_tpu_kernel else contextlib.nullcontext()
        with placement.on(device), kernel_context:
            return jax.block_until_ready(fn(*args))

    return call


def timed_via(impl: Implementation, case: Case) -> str:
    """What the timed call runs: "jit" (the jitted jax_fn) or "run" (the adapter's run)."""
    return "run" if impl.jax_fn(case) is None else "jit"


def comparable(a: BenchRecord, b: BenchRecord) -> bool:
    """Whether two bench records may be compared: same implementation, shape and pass, and
    the same backend. An interpreter timing is never comparable with a native TPU one."""
    return all(getattr(a, k) == getattr(b, k) for k in ("implementation", "pass_", "backend", "timed")) and (
        a.shape_name == b.shape_name
    )


def records_from_pytest_benchmark(data: dict[str, Any], *, run_id: str) -> list[BenchRecord]:
    """kind "bench" records from a pytest-benchmark JSON document (--benchmark-json with
    --benchmark-save-data). Each benchmark's extra_info carries implementation, backend,
    shape, case and pass, set by benchmarks/test_speed.py; entries without them are skipped."""
    out = []
    for bench in data.get("benchmarks", []):
        info = bench.get("extra_info") or {}
        if not {"implementation", "backend", "shape", "pass"} <= set(info):
            continue
        stats = bench.get("stats") or {}
        out.append(
            BenchRecord(
                run_id=run_id,
                time=data.get("datetime") or now(),
                implementation=info["implementation"],
                backend=info["backend"],
                device=info.get("device"),
                note=BENCH_NOTE.get(info["backend"], ""),
                timed=info.get("timed"),
                shape={"name": info["shape"], "case": info.get("case")},
                pass_=info["pass"],
                passed=True,
                samples=stats.get("data"),
                stats={k: stats.get(k) for k in ("min", "max", "mean", "median", "stddev", "rounds")},
                peak_rss_bytes=info.get("peak_rss_bytes"),
                device_peak_bytes=info.get("device_peak_bytes"),
                benchmark=bench.get("fullname") or bench.get("name"),
                gc_disabled=(bench.get("options") or {}).get("disable_gc"),
            )
        )
    return out


def bench_backend(impl: Implementation) -> str:
    """Where `impl` runs when benchmarked: the Pallas kernel's own backend ("tpu" or
    "tpu_interpret"), the default JAX platform for other JAX functions, else its declared one."""
    if impl.backend() in ("tpu", "tpu_interpret"):
        return impl.backend()
    return compat.jax_platform() if impl.framework == "jax" else impl.backend()


def timed_on(backend: str, on_cpu: bool) -> bool:
    """Whether a shape is benchmarked on `backend`: every shape natively, only the small
    (on_cpu) shapes under the interpreter or on a CPU."""
    return on_cpu or backend not in ("cpu", "tpu_interpret")
