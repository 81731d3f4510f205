"""Ahead-of-time TPU compile checks that need libtpu but no TPU.

`jax.experimental.topologies` gives compile-only devices for a TPU generation; lowering
a kernel with arguments placed on such a device and compiling it runs the real Mosaic
compiler. The executable is never run: what it yields is whether the kernel compiles
for that generation, and the compiler's memory and cost figures, which are
deterministic for a given library version and so can gate changes on a CPU-only CI.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.core import contract
from harness.core import shapes as shapes_mod
from harness.core.case import Case
from harness.core.contract import Implementation
from harness.core.shapes import PASSES, BenchShape
from harness.runtime import compat
from harness.store.derive import compile_command
from harness.store.failures import CompileFailureRecord
from harness.store.files import RunStore
from harness.store.outline import Outline
from harness.store.records import CompileRecord, now
from harness.tpu import mosaic, outline

# One chip of each generation the kernel targets (v4 and v5p name a 3-D torus).
TOPOLOGIES: tuple[str, ...] = ("v4:1x1x1", "v5e:1x1", "v5p:1x1x1", "v6e:1x1")


@dataclasses.dataclass(kw_only=True)
class CompileResult:
    """One implementation at one shape and pass, compiled for one topology."""

    implementation: str
    topology: str
    shape: str
    case: Case
    pass_: str  # "fwd" or "fwd_bwd"
    ok: bool
    error: str | None = None
    traceback: str | None = None
    memory: dict[str, int | None] = dataclasses.field(default_factory=dict)
    cost: dict[str, float | None] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    failure_file: str | None = None
    # Seconds per stage (harness.tpu.mosaic.STAGES): the median of `samples`, one per fresh process.
    times: dict[str, float | None] = dataclasses.field(default_factory=dict)
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    # The Mosaic kernels it lowered to (harness.tpu.mosaic.KernelBody.to_json()), in program order.
    kernels: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # False when a fresh process lowered the same job to another kernel body (None: lowered once).
    deterministic: bool | None = None
    kernels_error: str | None = None  # why the kernel bodies could not be read from the lowering
    # The optimized program around the kernels (harness.store.outline.Outline.to_json()), or why not.
    outline: dict[str, Any] | None = None
    outline_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["case"] = self.case.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CompileResult:
        return cls(**{**d, "case": Case.from_json(d["case"])})


def abstract_args(case: Case, sharding: Any) -> list[Any]:
    """ShapeDtypeStructs for (q, k, v[, bias]) of `case`, placed by `sharding`."""
    import jax

    q = (case.batch, case.q_heads, case.q_len, case.head_dim)
    kv = (case.batch, case.kv_heads, case.kv_len, case.head_dim)
    shapes = [q, kv, kv] + ([(case.batch, case.q_heads, case.q_len, case.kv_len)] if case.bias else [])
    return [jax.ShapeDtypeStruct(s, case.dtype, sharding=sharding) for s in shapes]


def with_backward(f: Callable[..., Any]) -> Callable[..., Any]:
    """f's forward and its full backward pass (cotangent = the output), as one function."""
    import jax

    def fwd_bwd(*args: Any) -> Any:
        out, pullback = jax.vjp(f, *args)
        return out, pullback(out)

    return fwd_bwd


def compile_record(result: CompileResult, *, run_id: str) -> CompileRecord:
    """The record of one CompileResult."""
    return CompileRecord(
        run_id=run_id,
        time=now(),
        implementation=result.implementation,
        topology=result.topology,
        shape={"name": result.shape, "case": result.case.to_json()},
        case_id=result.case.case_id,
        pass_=result.pass_,
        ok=result.ok,
        passed=result.ok,
        error=result.error,
        memory=result.memory,
        cost=result.cost,
        seconds=result.seconds,
        failure_file=result.failure_file,
        times=result.times,
        samples=result.samples,
        kernels=result.kernels,
        deterministic=result.deterministic,
        kernels_error=result.kernels_error,
        outline=None if result.outline is None else Outline.from_json(result.outline),
        outline_error=result.outline_error,
    )


def write_compile(store: RunStore, result: CompileResult) -> Path:
    return store.write(compile_record(result, run_id=store.run_id))


def compile_one(impl: Implementation, shape: BenchShape, topology: str, pass_: str) -> CompileResult:
    """Lower and compile one pass for one topology; any error becomes a failed result, never a raise."""
    from jax.sharding import SingleDeviceSharding

    result = CompileResult(
        implementation=impl.name, topology=topology, shape=shape.name, case=shape.case, pass_=pass_, ok=False
    )
    start = time.perf_counter()
    try:
        f = impl.jax_fn(shape.case)
        if f is None:
            raise TypeError(f"{impl.name} has no jax_fn, so it cannot be compiled ahead of time")
        device = compat.tpu_compile_device(topology)
        args = abstract_args(shape.case, SingleDeviceSharding(device))
        fn = f if pass_ == "fwd" else with_backward(f)
        lowered, compiled, result.times = mosaic.staged(fn, args)
        result.samples = {stage: [t] for stage, t in result.times.items() if t is not None}
        try:
            result.kernels = [k.to_json() for k in mosaic.kernel_bodies(lowered)]
        except Exception as e:  # noqa: BLE001 - the harness could not read the lowering: not a compile failure
            result.kernels_error = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        try:
            result.outline = outline.outline(lowered, compiled).to_json()
        except Exception as e:  # noqa: BLE001 - the harness could not read the program: not a compile failure
            result.outline_error = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        result.memory = compat.compiled_memory(compiled)
        result.cost = compat.compiled_cost(compiled)
        result.ok = True
    except Exception as e:  # a compile error is a finding to record, whatever its type
        result.error = f"{type(e).__name__}: {e}".splitlines()[0][:2000]
        result.traceback = traceback.format_exc()
    result.seconds = time.perf_counter() - start
    return result


def failure_record(result: CompileResult) -> CompileFailureRecord:
    """Everything needed to replay a compile failure: `python -m harness compile` with its flags."""
    return CompileFailureRecord(
        created=dt.datetime.now(dt.UTC).isoformat(),
        kernel=result.implementation,
        topology=result.topology,
        shape=result.shape,
        pass_=result.pass_,
        case=result.case.to_json(),
        error=str(result.error),
        traceback=result.traceback,
        versions=compat.library_versions(),
        replay=compile_command(
            kernel=result.implementation, topology=result.topology, shape=result.shape, pass_=result.pass_
        ),
    )


def write_failure(out_dir: Path, result: CompileResult) -> Path:
    from harness.store.files import atomic_write_json, safe_name

    name = safe_name(f"compile-{result.implementation}-{result.topology}-{result.shape}-{result.pass_}")
    path = Path(out_dir) / "failures" / f"{name}.json"
    atomic_write_json(path, failure_record(result).to_json())
    return path


@dataclasses.dataclass(frozen=True, kw_only=True)
class Job:
    """One compile to do: a kernel (a name or MODULE:ATTR, as --kernel takes), shape, topology, pass."""

    kernel: str
    shape: str
    topology: str
    pass_: str

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def plan(
    kernels: Iterable[str],
    shapes: Iterable[BenchShape],
    topologies: Iterable[str] = TOPOLOGIES,
    passes: Iterable[str] = PASSES,
) -> list[Job]:
    """Every kernel x shape x topology x pass, skipping shapes outside a kernel's contract."""
    out = []
    shapes, topologies, passes = list(shapes), list(topologies), list(passes)
    for spec in kernels:
        impl = contract.resolve(spec)
        for shape in shapes:
            if impl.violations(shape.case):
                continue
            for topology in topologies:
                for pass_ in passes:
                    if pass_ == "fwd_bwd" and not impl.capabilities.grads:
                        continue
                    out.append(Job(kernel=spec, shape=shape.name, topology=topology, pass_=pass_))
    return out


# Fresh processes each job is compiled in by default: the stage times are the median of as many
# samples, so one slow process (a loaded machine) does not move them. The gate judges a time only
# on 5 samples a side at least (gate_thresholds.toml: speed.min_samples; 5 against 5 is the fewest
# for which its Mann-Whitney test can reach p < 0.01).
REPEAT = 5


def compile_all(
    jobs: list[Job], *, repeat: int = REPEAT, on_result: Callable[[CompileResult], None] | None = None
) -> list[CompileResult]:
    """Run `jobs` in a child process, so that a compiler that aborts the process (libtpu can)
    becomes a failed result for the job it was on; a new child takes the remaining jobs.

    Then `repeat - 1` more rounds, each in fresh child processes, for the stage times alone:
    tracing, lowering and compiling a program again in the same process is served from caches.
    `on_result` sees each job once, with every round's samples.
    """
    results = _round(jobs)
    for _ in range(repeat - 1):
        again = [j for j, r in zip(jobs, results, strict=True) if r.ok]
        for first, later in zip([r for r in results if r.ok], _round(again), strict=True):
            _add_samples(first, later)
    for result in results:
        if on_result is not None:
            on_result(result)
    return results


def _add_samples(into: CompileResult, other: CompileResult) -> None:
    """`other`'s stage times as more samples of `into`; the times become the samples' medians."""
    if not other.ok:
        return
    for stage, values in other.samples.items():
        into.samples.setdefault(stage, []).extend(values)
    into.times = {stage: statistics.median(v) for stage, v in into.samples.items()}
    same = mosaic.digest(_bodies(into)) == mosaic.digest(_bodies(other))
    into.deterministic = same and into.deterministic is not False


def _bodies(result: CompileResult) -> list[mosaic.KernelBody]:
    return [mosaic.KernelBody.from_json(k) for k in result.kernels]


def _round(jobs: list[Job]) -> list[CompileResult]:
    """Every job once, in child processes (a new one after a crash), in order."""
    results: list[CompileResult] = []
    todo = list(jobs)
    while todo:
        done, crashed = _run_worker(todo, results)
        todo = todo[done:]
        if crashed is not None and todo:
            job, todo = todo[0], todo[1:]
            results.append(_failed(job, crashed))
    return results


_RESULT = "@@compile-result "
STDERR_TAIL = 20  # lines of the dead worker's stderr kept in the error
FATAL = re.compile(r"^F\d{4} |.*Check failed")


def _failed(job: Job, error: str) -> CompileResult:
    case = shapes_mod.SHAPES[job.shape].case
    return CompileResult(
        implementation=job.kernel,
        topology=job.topology,
        shape=job.shape,
        case=case,
        pass_=job.pass_,
        ok=False,
        error=error,
    )


def _run_worker(todo: list[Job], results: list[CompileResult]) -> tuple[int, str | None]:
    """Run jobs in order in one child; return how many finished, and why the child died (or None)."""
    done = 0
    with tempfile.TemporaryFile("w+") as err:
        cmd = [sys.executable, "-m", "harness.tpu.compile", json.dumps([j.to_json() for j in todo])]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if not line.startswith(_RESULT):
                    print(line, end="")
                    continue
                result = CompileResult.from_json(json.loads(line[len(_RESULT) :]))
                done += 1
                results.append(result)
        if proc.returncode == 0 and done == len(todo):
            return done, None
        err.seek(0)
        lines = [ln.strip() for ln in err.read().splitlines() if ln.strip()]
    how = f"exit {proc.returncode}"
    if proc.returncode < 0:
        how = f"signal {-proc.returncode}"
        with contextlib.suppress(ValueError):
            how = f"signal {signal.Signals(-proc.returncode).name}"
    # An absl fatal log line ("F1129 12:00:00.0 ... Check failed: ...") says why; else the tail.
    fatal = [ln for ln in lines if FATAL.match(ln)]
    why = fatal[0] if fatal else " | ".join(lines[-STDERR_TAIL:])
    return done, f"the compiling process died ({how}): {why[-2000:]}"


def _worker(jobs_json: str) -> None:
    """Child side of compile_all: compile each job in order, one result line each on stdout."""
    import jax

    for job in (Job(**j) for j in json.loads(jobs_json)):
        # Each job traced, lowered and compiled from nothing: the same shape's trace from the job
        # before (another topology or pass) would otherwise be served from jax's caches.
        jax.clear_caches()
        result = compile_one(contract.resolve(job.kernel), shapes_mod.SHAPES[job.shape], job.topology, job.pass_)
        print(_RESULT + json.dumps(result.to_json()), flush=True)


if __name__ == "__main__":
    compat.default_platforms_env()  # a process start, before jax is imported
    _worker(sys.argv[1])
