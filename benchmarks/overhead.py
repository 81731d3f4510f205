"""Seconds per example, and the harness's overhead over the bare kernel and oracle calls.

Runs the real search (Hypothesis, inputs, comparison, records on disk) and, in the same
run, times every kernel and oracle call it makes (the float64 truth and the same-dtype
ruler included). overhead = wall time of the search / time inside those calls.

    python benchmarks/overhead.py [--examples N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import harness  # noqa: F401  (JAX platform set-up before jax is imported)
from harness.core import contract, reference
from harness.running.search import search
from harness.store.files import RunStore, atomic_write_json

CALLS = {"seconds": 0.0, "count": 0}


def timed(fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            CALLS["seconds"] += time.perf_counter() - start
            CALLS["count"] += 1

    return wrapper


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=10)
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/overhead.json"))
    args = p.parse_args()
    kernel = contract.resolve(args.kernel)
    oracles = [contract.resolve("torch_sdpa")]
    for impl in (kernel, *oracles):
        impl.run = timed(impl.run)
    # truth() calls run_reference() in float64, so timing run_reference covers both references.
    reference.run_reference = timed(reference.run_reference)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(tmp, meta={"command": "benchmarks/overhead.py"})
        start = time.perf_counter()
        outcome = search(kernel, oracles, examples=args.examples, profile="ci", on_result=store.write_case)
        wall = time.perf_counter() - start
    n = len(outcome.results)
    figures = {
        "kernel": kernel.name,
        "examples": n,
        "passed": outcome.passed,
        "wall_seconds": wall,
        "seconds_per_example": wall / n,
        "call_seconds": CALLS["seconds"],
        "calls": CALLS["count"],
        "overhead_ratio": wall / CALLS["seconds"],
        "target_ratio": 1.2,
        "versions": harness.runtime.compat.library_versions(),
    }
    atomic_write_json(args.out, figures)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
