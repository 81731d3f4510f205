"""Benchmark (recorded, not a timed test): CPU seconds to detect each planted bug under the ci profile.

    python -m tests.bench_planted [--out reports/bench_planted.json] [NAME ...]

Each planted kernel is searched in a fresh process (cold caches, as a CI job starts), the
same search `python -m harness run --profile ci --kernel tests.planted.NAME:flash_attention`
runs, with the interpreter checks tests.planted.INTERPRET names. Figures per bug: cases
drawn until the first failure, the process's CPU seconds and wall seconds at that point
(import and JIT compilation included), and the same after shrinking. CPU time is the honest
figure on a shared machine; wall time depends on load.
Target (issue 24): detection in at most 10 CPU seconds on 2 cores.

ATTN_BENCH_NO_SMOKE=1 measures without the smoke cases (detection by drawn cases alone), and
ATTN_BENCH_NO_REUSE=1 without the pool of compiled programs (harness.core.pool): the two
together against NO_SMOKE alone show whether drawing from a pool detects as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TARGET_CPU_S = 10.0


def measure(name: str) -> dict:
    """Search one planted kernel in this process; called in a fresh child per bug."""
    from harness.core import compat, contract
    from harness.running.search import search
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
    )
    return {
        "planted": name,
        "kind": {**PLANTED, **FIXTURES}[name],
        "interpret": options.to_json(),
        "smoke": SMOKE,
        "reuse": REUSE,
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
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    rows = []
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    for name in args.names or list(PLANTED):
        proc = subprocess.run(
            [sys.executable, "-m", "tests.bench_planted", "--one", name], capture_output=True, text=True, env=env
        )
        if proc.returncode:
            rows.append({"planted": name, "error": proc.stderr.strip().splitlines()[-1:]})
        else:
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        if "error" in r:
            print(f"{name:<28} ERROR {r['error']}", flush=True)
        else:
            cpu, wall = r["detect_cpu_s"], r["detect_wall_s"]
            verdict = "no detection" if cpu is None else ("ok" if cpu <= TARGET_CPU_S else "OVER TARGET")
            print(
                f"{name:<28} {r['kind']:<30} cases {r['cases_to_detect'] or '-'!s:>2}  detect cpu "
                f"{cpu if cpu is None else round(cpu, 1)} s wall {wall if wall is None else round(wall, 1)} s"
                f"  total cpu {r['total_cpu_s']:.1f} s  {verdict}",
                flush=True,
            )
    doc = {"target_detect_cpu_s": TARGET_CPU_S, "cpus": os.cpu_count(), "load_average": os.getloadavg(), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"figures -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
