"""Benchmark (recorded, not a timed test): CPU seconds to detect each planted bug under the ci profile.

    python -m tests.bench_planted [--out reports/bench_planted.json] [--first-failure] [--repeat 3] [NAME ...]

Each planted kernel is searched in a fresh process, the same search `python -m harness run
--profile ci --kernel tests.planted.NAME:flash_attention` runs, with the interpreter checks
tests.planted.INTERPRET names. The caches are the benchmark's own, in a temporary directory, as
after an engineer's first run of the upstream kernel: a first process finds the upstream kernel's
smoke set (harness.core.smoke; a drop-in draws the built-in's set, kept on disk), reported apart
as `smoke_set`; every program, the kernel's and the references', is compiled anew in each process
(a JAX compilation cache of its own, empty). Figures per bug: cases
drawn until the first failure, the process's CPU seconds and wall seconds at that point
(import and JIT compilation included), and the same after shrinking. CPU time is the honest
figure on a shared machine; wall time depends on load. Each figure is the median of --repeat fresh
processes (their spread is printed and kept): on an idle 2-core machine one bug's processes spread
by up to a fifth (17.2 to 21.1 CPU s for fwd_rescale_alpha, tree d357ce5).
Target (issue 24): detection in at most 10 CPU seconds on 2 cores. --first-failure stops each search
at its first failure (then shrinks it), as `run --first-failure` does: the detection figures are the
same, the benchmark takes minutes instead of a quarter of an hour.

ATTN_BENCH_NO_SMOKE=1 measures without the smoke cases (detection by drawn cases alone), and
ATTN_BENCH_NO_REUSE=1 without the pool of compiled programs (harness.core.pool): the two
together against NO_SMOKE alone show whether drawing from a pool detects as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.runtime.caches import COMPILATION_CACHE_ENV

TARGET_CPU_S = 10.0


def measure(name: str, *, first_failure: bool = False) -> dict:
    """Search one planted kernel in this process; called in a fresh child per bug."""
    from harness.core import contract
    from harness.running.search import search
    from harness.runtime import compat
    from tests.planted import FIXTURES, INTERPRET, PLANTED, spec

    options = compat.InterpretOptions(**INTERPRET.get(name, {}))
    # As `run` picks: the fast interpreter and its policy (runner.plan), faithful where a check needs it.
    policy = "faithful" if options.checks else "fast"
    options = dataclasses.replace(options, interpreter=policy)
    kernel = contract.resolve(spec(name))
    oracles = [contract.resolve("torch_sdpa")]
    first: dict = {}

    seen = {"cases": 0}

    def on_result(result) -> None:
        seen["cases"] += 1
        if not result.passed and not first:
            # The search goes on past it (every distinct failure): the figures are taken here.
            first.update(cpu_s=time.process_time(), wall_s=time.perf_counter() - WALL0, cases=seen["cases"])

    outcome = search(
        kernel,
        oracles,
        profile="ci",
        interpret=options,
        interpreters=policy,
        smoke=SMOKE,
        reuse=REUSE,
        on_result=on_result,
        first_failure=first_failure,
    )
    return {
        "planted": name,
        "kind": {**PLANTED, **FIXTURES}[name],
        "interpret": options.to_json(),
        "smoke": SMOKE,
        "reuse": REUSE,
        "first_failure": first_failure,
        "detected": outcome.shrunk is not None,
        "cases_to_detect": first.get("cases"),
        "cases": len(outcome.results),
        "distinct_failures": len(outcome.failures),
        "detect_cpu_s": first.get("cpu_s"),
        "detect_wall_s": first.get("wall_s"),
        "shrink_runs": outcome.shrink_runs,
        "shrink_exhausted": outcome.shrink_exhausted,
        "total_cpu_s": time.process_time(),
        "total_wall_s": time.perf_counter() - WALL0,
        "shrunk_case": str(outcome.shrunk.case) if outcome.shrunk else None,
        "versions": compat.library_versions(),
    }


WALL0 = time.perf_counter()
# As `run` searches: smoke cases first (harness.core.smoke), unless ATTN_BENCH_NO_SMOKE=1 measures without them.
SMOKE = os.environ.get("ATTN_BENCH_NO_SMOKE") != "1"
REUSE = os.environ.get("ATTN_BENCH_NO_REUSE") != "1"


def main() -> int:
    from tests.planted import PLANTED

    p = argparse.ArgumentParser(prog="python -m tests.bench_planted", description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", metavar="NAME", help=f"planted modules (default all: {', '.join(PLANTED)})")
    p.add_argument("--out", type=Path, default=Path("reports/bench_planted.json"))
    p.add_argument("--first-failure", action="store_true", help="stop each search at its first failure")
    p.add_argument("--repeat", type=int, default=3, metavar="N", help="fresh processes per bug, median reported")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--smoke-set", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, first_failure=args.first_failure)))
        return 0
    if args.smoke_set:
        print(json.dumps(smoke_set()))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-planted-") as caches:
        env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
        # The finder's compilation cache DIR keeps the smoke set beside it, in DIR-smoke (smoke.cache_path).
        finder = {**env, COMPILATION_CACHE_ENV: os.path.join(caches, "jax")}
        done = subprocess.run(
            [sys.executable, "-m", "tests.bench_planted", "--smoke-set"], capture_output=True, text=True, env=finder
        )
        if done.returncode:
            raise SystemExit(f"finding the smoke set failed: {done.stderr.strip().splitlines()[-1:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        took = f"its process took {found['cpu_s']:.1f} CPU s"
        print(f"{'smoke set':<28} {found['cases']} cases of {found['kernel']}: {took}")
        rows = _measure_all(
            args.names or list(PLANTED), env, caches, first_failure=args.first_failure, repeat=args.repeat
        )
    doc = {
        "target_detect_cpu_s": TARGET_CPU_S,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "repeat": args.repeat,
        "smoke_set": found,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"figures -> {args.out}")
    return 0


def smoke_set() -> dict:
    """Find (and keep on disk) the upstream kernel's smoke set, which every planted drop-in draws."""
    from harness.core import contract, smoke

    kernel = contract.resolve("pallas_flash")
    cases = list(smoke.iter_smoke_cases(kernel))
    return {"kernel": kernel.name, "cases": len(cases), "cpu_s": time.process_time()}  # imports included


def _measure_all(names: list[str], env: dict, caches: str, *, first_failure: bool, repeat: int) -> list[dict]:
    rows = []
    for name in names:
        runs = [_measure_one(name, env, caches, first_failure=first_failure) for _ in range(repeat)]
        errors = [r for r in runs if "error" in r]
        if errors:
            rows.append(errors[0])
            print(f"{name:<28} ERROR {errors[0]['error']}", flush=True)
            continue
        # The median of `repeat` fresh processes: a 2-core shared machine's CPU seconds vary by a third run to run.
        r = dict(runs[0])
        for key in ("detect_cpu_s", "detect_wall_s", "total_cpu_s", "total_wall_s"):
            values = [x[key] for x in runs]
            r[key] = None if None in values else statistics.median(values)
            r[f"{key}_runs"] = values
        rows.append(r)
        cpu, wall = r["detect_cpu_s"], r["detect_wall_s"]
        verdict = "no detection" if cpu is None else ("ok" if cpu <= TARGET_CPU_S else "OVER TARGET")
        spread = "" if cpu is None else f" ({min(r['detect_cpu_s_runs']):.1f}-{max(r['detect_cpu_s_runs']):.1f})"
        print(
            f"{name:<28} {r['kind']:<30} cases {r['cases_to_detect'] or '-'!s:>2}  detect cpu "
            f"{cpu if cpu is None else round(cpu, 1)} s{spread} wall {wall if wall is None else round(wall, 1)} s"
            f"  total cpu {r['total_cpu_s']:.1f} s  {verdict}",
            flush=True,
        )
    return rows


def _measure_one(name: str, env: dict, caches: str, *, first_failure: bool) -> dict:
    # An empty compilation cache of its own, the smoke set's directory linked in beside it.
    own = tempfile.mkdtemp(dir=caches)
    child = {**env, COMPILATION_CACHE_ENV: os.path.join(own, "jax")}
    os.symlink(os.path.join(caches, "jax-smoke"), child[COMPILATION_CACHE_ENV] + "-smoke")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.bench_planted", "--one", name, *(["--first-failure"] * first_failure)],
        capture_output=True,
        text=True,
        env=child,
    )
    if proc.returncode:
        return {"planted": name, "error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
