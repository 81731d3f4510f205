"""Cases checked per wall-minute with `run --jobs N` against `--jobs 1`, this checkout, one after the other.

Each side runs `python -m harness run --profile ci --examples E --kernel K --no-database --jobs N --out TMP`
in a child process (benchmarks/throughput.run_side: cases counted from its progress lines, CPU
seconds from the kernel's accounting of the child and its workers). Wall time is the figure
here, so the load average beside each side says how much of the machine the run had.

    python benchmarks/jobs.py [--jobs N] [--examples E] [--kernel K] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import child_env, run_side  # noqa: E402 - after the path set-up
from harness.store.files import atomic_write_json  # noqa: E402


def measure(jobs: int, examples: int, kernel: str) -> dict[str, Any]:
    sides = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, jobs):
            argv = ["run", "--profile", "ci", "--examples", str(examples), "--kernel", kernel, "--no-database"]
            # Each side starts from an empty compilation cache, as a fresh CI job does.
            env = child_env(ROOT, Path(tmp) / f"jax-cache-{n}")
            side = run_side(ROOT, [*argv, "--jobs", str(n), "--out", str(Path(tmp) / f"store-{n}")], env)
            side["cases_per_wall_minute"] = 60 * side["cases"] / side["wall_s"]
            sides[f"jobs_{n}"] = side
            print(f"--jobs {n}: {side}", flush=True)
    one, many = sides["jobs_1"], sides[f"jobs_{jobs}"]
    return {
        "command": f"python benchmarks/jobs.py --jobs {jobs} --examples {examples} --kernel {kernel}",
        "sides": sides,
        "speedup_wall": many["cases_per_wall_minute"] / one["cases_per_wall_minute"],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--examples", type=int, default=20)
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "jobs.json")
    args = p.parse_args()
    if args.jobs < 2:
        p.error(f"--jobs={args.jobs} must be at least 2 (it is compared with --jobs 1)")
    doc = measure(args.jobs, args.examples, args.kernel)
    atomic_write_json(args.out, doc)
    print(f"cases per wall-minute: x{doc['speedup_wall']:.2f} with --jobs {args.jobs} -> {args.out}")


if __name__ == "__main__":
    main()
