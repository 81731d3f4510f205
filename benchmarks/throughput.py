"""Cases checked per CPU-minute, this checkout against a baseline revision, in one run on one machine.

Each side runs the same command in a child process,
`python -m harness run --profile ci --examples N --kernel K --no-database --out TMP`,
and its CPU seconds (user + system, the child and its workers) are read from the kernel's
accounting of the finished child (os.wait4), so other load on the machine does not count.
Both sides are `git archive REV` of this repository (the candidate HEAD by default: commit
what you measure), unpacked in a temporary directory. The candidate runs twice: with an
empty JAX compilation cache (a fresh CI job) and again with the cache the first run filled
(a job that restores its cache, or a developer's second run).

    python benchmarks/throughput.py [--baseline REV] [--candidate REV] [--examples N] [--kernel K] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASELINE = "2e1da82"  # main before issue 17


def run_side(checkout: Path, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One `run` in a child process: its exit code, cases, CPU and wall seconds."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", *argv], cwd=checkout, env=env, stdout=subprocess.PIPE, text=True
    )
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    cases = sum(line.startswith("[") for line in output.splitlines())
    return {
        "exit_code": proc.returncode,
        "cases": cases,
        "cpu_s": cpu,
        "wall_s": time.perf_counter() - start,
        "cases_per_cpu_minute": 60 * cases / cpu if cpu else None,
        "load_average": os.getloadavg(),
    }


def child_env(tree: Path, cache: Path, **changes: str | None) -> dict[str, str]:
    """The environment a measured `run` gets: `tree` on the path, CPU JAX unless chosen, its own
    compilation cache `cache`; then `changes` (None removes a variable)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
        "ATTN_HARNESS_COMPILATION_CACHE": str(cache),
    }
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def checkout(rev: str, into: Path) -> Path:
    """`git archive REV` of this repository, unpacked under `into`."""
    archive = into / f"{rev}.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), rev], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / rev, filter="data")
    return into / rev


def _commit(rev: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True)
    return out.stdout.strip() or rev


def measure(baseline: str, candidate: str, examples: int, kernel: str) -> dict[str, Any]:
    # Resolved before anything runs: HEAD may move while the runs take their minutes.
    baseline, candidate = _commit(baseline), _commit(candidate)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base, cand = checkout(baseline, tmp), checkout(candidate, tmp)
        sides = {}
        for name, tree in (("baseline", base), ("cold_cache", cand), ("warm_cache", cand)):
            out = tmp / f"store-{name}"
            argv = ["run", "--profile", "ci", "--examples", str(examples), "--kernel", kernel, "--no-database"]
            # One process, as the baseline (which predates --jobs): CPU per case, not wall time
            # (benchmarks/jobs.py measures --jobs).
            env = child_env(tree, tmp / "jax-cache", ATTN_HARNESS_JOBS="1")
            sides[name] = run_side(tree, [*argv, "--out", str(out)], env)
            print(f"{name:<10} {sides[name]}", flush=True)
    rate = {k: v["cases_per_cpu_minute"] for k, v in sides.items()}
    return {
        "command": f"python benchmarks/throughput.py --baseline {baseline} --candidate {candidate} "
        f"--examples {examples} --kernel {kernel}",
        "baseline": baseline,
        "candidate": candidate,
        "sides": sides,
        "speedup_cold": rate["cold_cache"] / rate["baseline"],
        "speedup_warm": rate["warm_cache"] / rate["baseline"],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default=DEFAULT_BASELINE, help=f"git revision (default {DEFAULT_BASELINE})")
    p.add_argument("--candidate", default="HEAD", help="git revision (default HEAD)")
    p.add_argument("--examples", type=int, default=10)
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "throughput.json")
    args = p.parse_args()
    doc = measure(args.baseline, args.candidate, args.examples, args.kernel)
    sys.path.insert(0, str(ROOT))
    from harness.store.files import atomic_write_json

    atomic_write_json(args.out, doc)
    cold, warm = doc["speedup_cold"], doc["speedup_warm"]
    print(f"cases per CPU-minute: x{cold:.2f} (cold cache), x{warm:.2f} (warm cache) -> {args.out}")


if __name__ == "__main__":
    main()
