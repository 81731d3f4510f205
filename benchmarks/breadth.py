"""Breadth of a run (issue 24): what a 60-case run of pallas_flash checks, and what it costs.

Two parts, written to one JSON:

- the draw: the cases a passing `run --examples N --seed S` checks, drawn as `run` draws them
  (smoke cases, pool, shards) with `runner.run_case` replaced by one that passes at once, so no
  kernel runs: distinct compiled programs (harness.core.pool.program_key), the share of cases
  with several inner key steps per major block (tiling class several_minor: block_k below
  block_k_major, two or more steps), pairwise coverage per shard of `--jobs J` and merged;
- the cost (unless --no-run): `python -m harness run --examples N --seed S --jobs 1` in a child
  process, its CPU seconds (the child's user + system time, its own children included) and
  cases per CPU-minute.

    python benchmarks/breadth.py [--kernel K] [--examples 60] [--seed 1] [--jobs 2] [--no-run]
                                 [--interpreter fast|faithful|both] [--out FILE]

--interpreter is passed to `run` (the cost part) where `run` has that option.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402,F401 - JAX platform set-up before jax is imported
from harness.core import contract, features, pool  # noqa: E402
from harness.running import runner, search  # noqa: E402
from harness.running.jobs import shard  # noqa: E402
from harness.store.files import atomic_write_json  # noqa: E402


def _pass(case, subjects, **options) -> runner.CaseResult:  # noqa: ANN001 - runner.run_case's signature
    return runner.CaseResult(case=case, subjects=[])


def drawn(
    kernel: contract.Implementation, *, examples: int, seed: int | None, profile: str, shard: shard.Shard
) -> list:
    """The cases shard `shard` of a passing `run --examples examples` checks, in order."""
    real = search.runner.run_case
    search.runner.run_case = _pass
    try:
        outcome = search.search(
            kernel,
            [],
            examples=shard.examples(examples),
            seed=seed,
            profile=profile,
            smoke=True,
            owns=shard.owns if shard.count > 1 else None,
        )
    finally:
        search.runner.run_case = real
    return [r.case for r in outcome.results]


def inner_steps(kernel: contract.Implementation, case) -> bool:  # noqa: ANN001 - a Case
    """Several inner key steps per major block in the forward pass (the several_minor tiling class)."""
    return "several_minor" in kernel.tiling(case)


def draw_figures(kernel: contract.Implementation, cases: list, *, within: int) -> dict[str, Any]:
    cov = features.coverage(kernel, cases, within=within)
    return {
        "cases": len(cases),
        "programs": len({pool.program_key(c) for c in cases}),
        "inner_step_share": sum(inner_steps(kernel, c) for c in cases) / max(len(cases), 1),
        "pair_share": cov.pair_share,
        "pairs": f"{cov.pairs}/{cov.declared_pairs}",
        "missing_pairs": list(cov.missing_pairs),
    }


def measure_draw(name: str, *, examples: int, seed: int | None, profile: str, jobs: int) -> dict[str, Any]:
    kernel = contract.resolve(name)
    one = drawn(kernel, examples=examples, seed=seed, profile=profile, shard=shard.Shard(0, 1))
    parts = [
        drawn(kernel, examples=examples, seed=seed, profile=profile, shard=shard.Shard(i, jobs)) for i in range(jobs)
    ]
    merged = [c for part in parts for c in part]
    return {
        "jobs_1": draw_figures(kernel, one, within=examples),
        f"jobs_{jobs}": {
            "shards": [draw_figures(kernel, part, within=examples) for part in parts],
            "merged": draw_figures(kernel, merged, within=examples),
        },
    }


def measure_run(name: str, *, examples: int, seed: int | None, interpreter: str | None) -> dict[str, Any]:
    """`run` in a child process (one shard, no database, a fresh store); its CPU seconds."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "harness", "run", "--kernel", name, "--examples", str(examples)]
        cmd += ["--jobs", "1", "--no-database", "--out", out] + (["--seed", str(seed)] if seed is not None else [])
        cmd += ["--interpreter", interpreter] if interpreter else []
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "command": " ".join(cmd[1:]).replace(out, "TMP"),
        "exit": done.returncode,
        "cpu_s": round(cpu, 1),
        "wall_s": round(wall, 1),
        "cases_per_cpu_minute": round(examples / cpu * 60, 1),
        "tail": done.stdout[-1500:] if done.returncode not in (0, 1) else "",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--examples", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", default="dev", help="the draw's profile (run's default: dev)")
    p.add_argument("--jobs", type=int, default=2, help="shards whose draws are measured apart and merged")
    p.add_argument("--no-run", action="store_true", help="the draw only: run no kernel")
    p.add_argument("--interpreter", help="passed to run (where run has --interpreter)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "breadth.json")
    args = p.parse_args()
    doc: dict[str, Any] = {
        "command": " ".join(["python benchmarks/breadth.py", *sys.argv[1:]]),
        "kernel": args.kernel,
        "examples": args.examples,
        "seed": args.seed,
        "draw": measure_draw(args.kernel, examples=args.examples, seed=args.seed, profile=args.profile, jobs=args.jobs),
    }
    if not args.no_run:
        doc["run"] = measure_run(args.kernel, examples=args.examples, seed=args.seed, interpreter=args.interpreter)
    atomic_write_json(args.out, doc)
    one, many = doc["draw"]["jobs_1"], doc["draw"][f"jobs_{args.jobs}"]
    print(f"{args.kernel}, {args.examples} cases, seed {args.seed}:")
    print(f"  --jobs 1: {one['programs']} programs, {one['inner_step_share']:.0%} with inner key steps, "
          f"pairwise {one['pair_share']:.0%}")  # fmt: skip
    shares = ", ".join(f"{s['pair_share']:.0%} ({s['programs']} programs)" for s in many["shards"])
    print(f"  --jobs {args.jobs}: pairwise per shard {shares}; merged {many['merged']['pair_share']:.0%}, "
          f"{many['merged']['programs']} programs")  # fmt: skip
    if "run" in doc:
        r = doc["run"]
        print(f"  run: exit {r['exit']}, {r['cpu_s']} CPU s, {r['cases_per_cpu_minute']} cases per CPU-minute")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
