"""What running the kernel in a worker process costs: CPU and peak memory of a 30-case run,
by default (kernel in the worker) and with `--in-process`, this checkout, one after the other.

Each side runs `python -m harness run --profile ci --examples E --seed 1 --kernel K --no-database
--jobs 1 --out TMP [--in-process]` in a child process from an empty compilation cache: CPU seconds
from the kernel's accounting of the child and its worker (os.wait4), peak memory as the largest sum
of the resident sets of the child and all its descendants, read from /proc every POLL_S seconds
(benchmarks/peak_rss.tree_rss). The load average beside each side says how much of the machine it had.

    python benchmarks/isolation.py [--examples E] [--kernel K] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.peak_rss import POLL_S, tree_rss  # noqa: E402 - after the path set-up
from benchmarks.throughput import child_env  # noqa: E402
from harness.store.files import atomic_write_json  # noqa: E402


def run_side(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One `run` in a child process: exit code, cases, CPU and wall seconds, peak resident memory."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE)
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    peak = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(POLL_S)
    reader.join()
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "exit_code": os.waitstatus_to_exitcode(status),
        "cases": sum(line.startswith(b"[") for line in lines),
        "cpu_s": cpu,
        "wall_s": time.perf_counter() - start,
        "peak_rss_gib": round(peak / 2**30, 3),
        "load_average": os.getloadavg(),
    }


def measure(examples: int, kernel: str) -> dict[str, Any]:
    sides = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("worker", []), ("in_process", ["--in-process"])):
            argv = ["run", "--profile", "ci", "--examples", str(examples), "--seed", "1", "--kernel", kernel]
            argv += ["--no-database", "--jobs", "1", "--out", str(Path(tmp) / f"store-{name}"), *extra]
            side = run_side(argv, child_env(ROOT, Path(tmp) / f"jax-cache-{name}"))
            sides[name] = side
            print(f"{name}: {side}", flush=True)
    worker, here = sides["worker"], sides["in_process"]
    return {
        "command": f"python benchmarks/isolation.py --examples {examples} --kernel {kernel}",
        "sides": sides,
        "cpu_ratio": worker["cpu_s"] / here["cpu_s"],
        "peak_rss_ratio": worker["peak_rss_gib"] / here["peak_rss_gib"],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=30)
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "isolation.json")
    args = p.parse_args()
    doc = measure(args.examples, args.kernel)
    atomic_write_json(args.out, doc)
    print(f"kernel in a worker: x{doc['cpu_ratio']:.2f} CPU, x{doc['peak_rss_ratio']:.2f} peak memory -> {args.out}")


if __name__ == "__main__":
    main()
