"""Where a case's time goes: the real search, each step's CPU and wall time, compilation apart.

Runs the same search `python -m harness run --profile ci --jobs 1` runs, in this process (smoke
cases, the `--interpreter` policy, Hypothesis, inputs, the kernel, the float64 truth, the
same-dtype ruler, the torch oracle, comparison, records on disk), and attributes every second to
one step:

- kernel: the kernel under test (on a CPU host under the fast interpreter; "kernel faithful": under the
  faithful one, the smoke cases, a share of the drawn cases, and every failure's confirmation);
- truth: the float64 reference; ruler: the same reference in the case dtype;
- torch: the torch SDPA oracle;
- harness: everything else (drawing, inputs, magnitudes, comparison, records, cache clearing).

Within each JAX step, JAX's own compile events (tracing to a jaxpr, lowering to MLIR, the
backend compiler: `jax.monitoring` durations) are summed apart as `compile_s`; the rest of
the step is `execute_s`. CPU seconds are the whole process's (XLA's threads included), the
honest figure on a shared machine.

    python benchmarks/time_split.py [--examples N] [--kernel K] [--profile P] [--seed S] [--interpreter I] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402,F401 - JAX platform set-up before jax is imported
from harness.core import contract, reference  # noqa: E402
from harness.running.search import search  # noqa: E402
from harness.runtime import compat  # noqa: E402
from harness.store.files import RunStore, atomic_write_json  # noqa: E402

STEPS = ("kernel", "kernel faithful", "truth", "ruler", "torch", "harness")
# jax.monitoring duration events that are compilation, not execution (jax._src.dispatch).
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


@dataclasses.dataclass(kw_only=True)
class Step:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    compile_s: float = 0.0  # wall seconds inside JAX's compile events
    calls: int = 0

    def to_json(self) -> dict[str, float]:
        return dataclasses.asdict(self) | {"execute_s": max(self.wall_s - self.compile_s, 0.0)}


class Split:
    """Seconds per step; a step nested in another (the truth calls the ruler's function) counts once, outermost."""

    def __init__(self) -> None:
        self.steps = {name: Step() for name in STEPS}
        self.active: str | None = None

    def on_duration(self, event: str, seconds: float, **_: Any) -> None:
        if event in COMPILE_EVENTS:
            self.steps[self.active or "harness"].compile_s += seconds

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self.active is not None:
            yield
            return
        self.active = name
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            s = self.steps[name]
            s.wall_s += time.perf_counter() - wall
            s.cpu_s += time.process_time() - cpu
            s.calls += 1
            self.active = None

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.step(name):
                return fn(*args, **kwargs)

        return wrapper


def instrument(split: Split, kernel: contract.Implementation, oracles: list[contract.Implementation]) -> None:
    """Wrap the step functions the runner calls (by module attribute, so the runner's calls go through them)."""
    import jax

    from harness.running import execute

    jax.monitoring.register_event_duration_secs_listener(split.on_duration)
    run = execute._run

    # Every implementation runs through execute._run (the kernel's reruns and batch rows too), under
    # the interpreter options it was given: the kernel's time is split by interpreter.
    def timed(impl, case, inputs, *, grads, interpret):  # noqa: ANN001, ANN202 - execute._run's signature
        if impl is kernel:
            name = "kernel faithful" if interpret.interpreter == "faithful" else "kernel"
        else:
            name = "torch" if impl.framework == "torch" else impl.name
        with split.step(name):
            return run(impl, case, inputs, grads=grads, interpret=interpret)

    execute._run = timed
    # The runner calls them as reference.truth / reference.run_reference (harness.core.reference).
    reference.truth = split.wrap("truth", reference.truth)
    reference.run_reference = split.wrap("ruler", reference.run_reference)


def measure(
    kernel_spec: str, examples: int, profile: str, *, seed: int | None = None, interpreter: str = "fast"
) -> dict[str, Any]:
    kernel = contract.resolve(kernel_spec)
    oracles = [contract.resolve("torch_sdpa")]
    split = Split()
    instrument(split, kernel, oracles)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(tmp, meta={"command": "benchmarks/time_split.py"})
        wall0, cpu0 = time.perf_counter(), time.process_time()
        # As `run` searches by default: the smoke cases first, the fast interpreter's policy.
        outcome = search(
            kernel,
            oracles,
            examples=examples,
            profile=profile,
            seed=seed,
            interpreters=interpreter,
            smoke=True,
            on_result=store.write_case,
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    measured = [s for name, s in split.steps.items() if name != "harness"]
    rest = split.steps["harness"]
    rest.wall_s = wall - sum(s.wall_s for s in measured)
    rest.cpu_s = cpu - sum(s.cpu_s for s in measured)
    n = len(outcome.results) + outcome.shrink_runs
    return {
        "command": f"python benchmarks/time_split.py --kernel {kernel_spec} --examples {examples} --profile {profile}"
        + (f" --seed {seed}" if seed is not None else "")
        + f" --interpreter {interpreter}",
        "kernel": kernel.name,
        "profile": profile,
        "cases": n,
        "passed": outcome.passed,
        "wall_s": wall,
        "cpu_s": cpu,
        "cases_per_cpu_minute": 60 * n / cpu,
        "steps": {name: s.to_json() for name, s in split.steps.items()},
        # Each step's share of the CPU seconds: comparable across loads, unlike the seconds.
        "cpu_share": {name: s.cpu_s / cpu for name, s in split.steps.items()},
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "versions": compat.library_versions(),
    }


def format_table(doc: dict[str, Any]) -> str:
    """The split as a text table: one row per step, seconds per case and share of the CPU."""
    n = doc["cases"]
    lines = [f"{doc['kernel']}: {n} cases, {doc['cases_per_cpu_minute']:.1f} cases per CPU-minute"]
    lines.append(f"  {'step':<8} {'cpu s/case':>10} {'share':>6} {'compile s/case':>15} {'execute s/case':>15}")
    for name, s in doc["steps"].items():
        lines.append(
            f"  {name:<8} {s['cpu_s'] / n:>10.2f} {doc['cpu_share'][name]:>6.0%} "
            f"{s['compile_s'] / n:>15.2f} {s['execute_s'] / n:>15.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=10)
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--profile", default="ci")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--interpreter", default="fast", help="run's --interpreter policy (default fast, as run)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "time_split.json")
    args = p.parse_args()
    doc = measure(args.kernel, args.examples, args.profile, seed=args.seed, interpreter=args.interpreter)
    atomic_write_json(args.out, doc)
    print(format_table(doc))
    print(f"-> {args.out}")
    print(json.dumps(doc["cpu_share"]))


if __name__ == "__main__":
    main()
