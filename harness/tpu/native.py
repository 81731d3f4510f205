"""Native measurements of a kernel on its accelerator, taken per case beside the correctness check.

Under an interpreter a timing measures the interpreter, so only kernels on a native
accelerator backend are measured (NATIVE_BACKENDS). The first call traces, compiles and
runs; it is timed apart from the warm calls, each of which waits for its result
(block_until_ready, inside harness.tpu.bench.timed_call). Device memory is the backend's own
statistic: the peak bytes in use so far in this process (JAX has no per-call reset), and the
bytes in use before the case, so a growing baseline shows.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any

from harness.core.case import Case
from harness.core.contract import Implementation
from harness.runtime import compat
from harness.tpu import bench

# Backends whose timings measure the kernel itself: never an interpreter, never the CPU stand-in.
NATIVE_BACKENDS: tuple[str, ...] = ("tpu", "gpu")
# Warm calls per case: a median of 5 resists one outlier (a preemption, a clock change) and
# costs microseconds to milliseconds per call natively.
WARM_CALLS = 5


@dataclasses.dataclass(frozen=True, kw_only=True)
class NativeTiming:
    """One kernel on one case, natively. Seconds; bytes None where the backend reports none."""

    backend: str
    device: str
    pass_: str  # "fwd" or "fwd_bwd"
    first_call_s: float  # trace + compile + run
    warm_s: tuple[float, ...]
    bytes_in_use_before: int | None
    peak_bytes: int | None

    @property
    def median_s(self) -> float:
        return statistics.median(self.warm_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "device": self.device,
            "pass": self.pass_,
            "first_call_s": self.first_call_s,
            "warm_s": list(self.warm_s),
            "median_s": self.median_s,
            "bytes_in_use_before": self.bytes_in_use_before,
            "peak_bytes": self.peak_bytes,
        }


def measured(impl: Implementation) -> bool:
    """Whether `impl` is measured natively per case: a kernel on an accelerator, not an interpreter
    (oracles always run on the CPU, harness.runtime.placement)."""
    return impl.role == "kernel" and impl.backend() in NATIVE_BACKENDS


def measure(impl: Implementation, case: Case, *, grads: bool, calls: int = WARM_CALLS) -> NativeTiming:
    """Time `calls` warm calls of `impl` on `case` after one untimed-for-warmth first call."""
    if calls < 1:
        raise ValueError(f"calls={calls} must be at least 1")
    pass_ = "fwd_bwd" if grads and impl.capabilities.grads else "fwd"
    on_cuda = impl.framework == "torch" and impl.backend() == "gpu"
    memory = _torch_cuda_memory if on_cuda else _jax_device_memory
    before, _ = memory(reset=True)
    call = bench.timed_call(impl, case, pass_)
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    warm = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        warm.append(time.perf_counter() - start)
    return NativeTiming(
        backend=impl.backend(),
        device=impl.device(),
        pass_=pass_,
        first_call_s=first,
        warm_s=tuple(warm),
        bytes_in_use_before=before,
        peak_bytes=memory(reset=False)[1],
    )


def _jax_device_memory(*, reset: bool) -> tuple[int | None, int | None]:
    """(bytes in use, peak bytes so far) of JAX's default device; JAX cannot reset the peak."""
    return compat.device_bytes_in_use(), compat.device_peak_bytes()


def _torch_cuda_memory(*, reset: bool) -> tuple[int | None, int | None]:  # pragma: no cover - needs CUDA
    import torch

    if reset:
        torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()
