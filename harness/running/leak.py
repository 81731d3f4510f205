"""Leak detection: call a kernel many times at one fixed shape and test whether memory grows per call.

A kernel that keeps something alive on every call (an output appended to a module-level
list, a cache keyed by a fresh object, residuals held by a backward pass) shows no error
in any one call: only the memory in use climbs with the number of calls. For each
variant (forward, or forward and backward; through the adapter's `run`, eagerly, or its
`jax_fn` jitted) this module samples, after every call past the warm-up:

  live_arrays  the number of live JAX arrays (jax.live_arrays())
  live_bytes   their total size in bytes
  device_bytes the device allocator's bytes_in_use (only where the backend reports it)
  rss_bytes    the host process's resident set size

and fits the growth per call with the Theil-Sen estimator (the median of the slopes of
all pairs of samples), which a few one-off steps (an allocator arena, a lazily built
constant) cannot move. A series whose slope is above its threshold (GROWTH_LIMITS) is a
leak. Measuring is separated from judging: `measure` returns samples, `judge` is pure.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.core.case import Case
from harness.core.contract import Implementation
from harness.core.inputs import make_inputs

if TYPE_CHECKING:
    from harness.store.records import LeakRecord

LEAK_SCHEMA = 1
DEFAULT_CALLS = 24  # sampled calls per variant, after the warm-up
# The first calls trace, compile and fill caches that then stay the same size: not a leak.
WARMUP_CALLS = 3
# The shape every kernel is called at: small (calls take milliseconds once compiled, even
# under the Pallas TPU interpreter) and inside every built-in kernel's contract (the Pallas
# TPU kernels need lengths that are multiples of 128).
LEAK_CASE = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=32, dtype="float32")

# Growth per call above which a series is a leak. live_arrays and live_bytes are exact
# counts (no noise): a kernel that frees what it made has slope 0, and one that keeps even
# one array every second call has slope >= 0.5; the byte limit is one row of the output
# (head_dim float32 values), far below any output a kernel could keep. device_bytes comes
# from the allocator, which rounds allocations up to pages, so it allows one 4 KiB page a
# call. rss_bytes is noisy (malloc arenas, the interpreter's own caches grow in steps),
# and the slope must exceed 1 MiB a call: a host leak that size costs a long job gigabytes.
GROWTH_LIMITS = {
    "live_arrays": 0.5,
    "live_bytes": 4.0 * LEAK_CASE.head_dim,
    "device_bytes": 4096.0,
    "rss_bytes": 1024.0 * 1024.0,
}
UNITS = {"live_arrays": "arrays", "live_bytes": "bytes", "device_bytes": "bytes", "rss_bytes": "bytes"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Variant:
    """One way of calling a kernel: pass "fwd" or "fwd_bwd", via "run" (eager adapter) or "jit"."""

    pass_: str
    via: str

    @property
    def name(self) -> str:
        return f"{self.pass_}-{self.via}"


VARIANTS = tuple(Variant(pass_=p, via=v) for v in ("run", "jit") for p in ("fwd", "fwd_bwd"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Growth:
    """One series judged: its slope per call against its limit."""

    series: str
    slope: float  # Theil-Sen growth per call
    limit: float
    first: float
    last: float

    @property
    def grows(self) -> bool:
        return self.slope > self.limit

    def __str__(self) -> str:
        return f"{self.series} +{self.slope:.3g} {UNITS[self.series]}/call (limit {self.limit:.3g})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeakResult:
    """One kernel, one variant: the samples per series and their verdict."""

    implementation: str
    backend: str
    variant: Variant
    case: Case
    calls: int
    samples: dict[str, list[float]]  # series -> one value per sampled call
    growth: list[Growth]
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and not any(g.grows for g in self.growth)

    @property
    def growing(self) -> list[Growth]:
        return [g for g in self.growth if g.grows]


def theil_sen(ys: list[float]) -> float:
    """Median slope over all pairs (i < j) of points (i, ys[i]); 0 for fewer than two points."""
    slopes = sorted((ys[j] - ys[i]) / (j - i) for i in range(len(ys)) for j in range(i + 1, len(ys)))
    if not slopes:
        return 0.0
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def judge(samples: dict[str, list[float]]) -> list[Growth]:
    """Each series' growth per call against GROWTH_LIMITS. Pure."""
    return [
        Growth(series=name, slope=theil_sen(ys), limit=GROWTH_LIMITS[name], first=ys[0], last=ys[-1])
        for name, ys in samples.items()
        if ys
    ]


def rss_bytes() -> int:
    """This process's current resident set size (Linux /proc; elsewhere the peak, a safe overestimate)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        from harness.tpu.bench import peak_rss_bytes

        return peak_rss_bytes()


def sample() -> dict[str, float]:
    """One reading of every series this backend has (device_bytes only where reported)."""
    import jax

    gc.collect()  # a kernel's garbage in reference cycles is not a leak: free it before counting
    arrays = jax.live_arrays()
    out = {"live_arrays": float(len(arrays)), "live_bytes": float(sum(a.nbytes for a in arrays))}
    del arrays
    stats = jax.devices()[0].memory_stats() if hasattr(jax.devices()[0], "memory_stats") else None
    if stats and "bytes_in_use" in stats:
        out["device_bytes"] = float(stats["bytes_in_use"])
    out["rss_bytes"] = float(rss_bytes())
    return out


def _call(impl: Implementation, case: Case, variant: Variant) -> Callable[[], Any] | None:
    """A zero-argument call of `variant`, or None where it does not apply (no jax_fn to jit)."""
    from harness.tpu import bench

    if variant.via == "jit":
        return bench.timed_call(impl, case, variant.pass_) if impl.jax_fn(case) is not None else None
    inputs = make_inputs(case)
    grads = variant.pass_ == "fwd_bwd"

    def call() -> None:
        impl.run(case, inputs, grads=grads)  # outputs are numpy copies: dropped at once

    return call


def measure(
    impl: Implementation, variant: Variant, *, calls: int = DEFAULT_CALLS, case: Case = LEAK_CASE
) -> LeakResult | None:
    """Call `impl` WARMUP_CALLS + `calls` times and sample after each sampled call; None if not applicable."""
    if calls < 3:
        raise ValueError(f"calls={calls} is too few to fit a slope; use at least 3")
    start = time.perf_counter()
    meta = {"implementation": impl.name, "backend": impl.backend(), "variant": variant, "case": case}
    try:
        call = _call(impl, case, variant)
        if call is None:
            return None
        for _ in range(WARMUP_CALLS):
            call()
        series: dict[str, list[float]] = {}
        for _ in range(calls):
            call()
            for name, value in sample().items():
                series.setdefault(name, []).append(value)
    except Exception as e:  # noqa: BLE001 - a kernel that raises is reported, not a harness crash
        from harness.running.execute import is_interrupt

        if is_interrupt(e):
            raise KeyboardInterrupt(str(e)) from e
        line = (str(e).strip().splitlines() or [""])[0]
        return LeakResult(
            **meta,
            calls=calls,
            samples={},
            growth=[],
            error=f"{type(e).__name__}: {line}"[:500],
            seconds=time.perf_counter() - start,
        )
    return LeakResult(**meta, calls=calls, samples=series, growth=judge(series), seconds=time.perf_counter() - start)


def leak_record(result: LeakResult, *, run_id: str) -> LeakRecord:
    """The kind "leak" record of `result` (harness.store.records.LeakRecord)."""
    from harness.store.records import LeakRecord, now

    return LeakRecord(
        leak_schema=LEAK_SCHEMA,
        run_id=run_id,
        time=now(),
        implementation=result.implementation,
        backend=result.backend,
        variant=result.variant.name,
        pass_=result.variant.pass_,
        via=result.variant.via,
        case=result.case.to_json(),
        case_id=result.case.case_id,
        calls=result.calls,
        warmup_calls=WARMUP_CALLS,
        samples=result.samples,
        growth=[dataclasses.asdict(g) for g in result.growth],
        growing=[str(g) for g in result.growing],
        passed=result.passed,
        error=result.error,
        seconds=result.seconds,
    )
