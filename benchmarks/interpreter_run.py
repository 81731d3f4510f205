"""A `run` under each interpreter policy, in one run on one machine: CPU seconds and who ran what.

Each side runs `python -m harness run --kernel K --examples N --seed S --jobs 1 --no-database
--interpreter P` as a child process from `git archive REV` (HEAD by default: commit what you
measure) with an empty compilation cache; "fast" runs a second time with the cache its first run
filled (the HLO interpreter's programs have no host callbacks, so JAX's persistent cache serves
them; the TPU interpret mode's never are). CPU seconds are the child's (os.wait4). From each
run's records: the kernel's cases, how many ended on each interpreter, how many both ran, the
interpreter divergences and the distinct compiled programs (harness.core.pool.program_key).

    python benchmarks/interpreter_run.py [--candidate REV] [--kernel K] [--examples N] [--seed S] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import _commit, checkout, child_env, run_side  # noqa: E402


def census(store: Path, kernel: str) -> dict[str, Any]:
    """Who ran the kernel's generated cases (shrink results left out), from the records."""
    from harness.core.case import Case
    from harness.core.pool import program_key

    ran: Counter = Counter()
    programs, both, diverged = set(), 0, 0
    for path in (store / "records").glob("*/*.json"):
        rec = json.loads(path.read_text())
        if rec.get("kind") != "case" or rec.get("implementation") != kernel or rec.get("shrunk"):
            continue
        ran[rec.get("interpreter") or "none"] += 1
        shadow = rec.get("shadow")
        both += shadow is not None
        diverged += bool(rec["passed"] and shadow is not None and not shadow["passed"])
        programs.add(program_key(Case.from_json(rec["case"])))
    return {"verdict_on": dict(ran), "both_ran": both, "divergences": diverged, "programs": len(programs)}


def measure(candidate: str, kernel: str, examples: int, seed: int) -> dict[str, Any]:
    candidate = _commit(candidate)
    sides = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tree = checkout(candidate, tmp)
        for name, policy, cache in (
            ("faithful", "faithful", "cache-faithful"),
            ("fast_cold", "fast", "cache-fast"),
            ("fast_warm", "fast", "cache-fast"),
        ):
            out = tmp / f"store-{name}"
            argv = ["run", "--kernel", kernel, "--examples", str(examples), "--seed", str(seed), "--jobs", "1"]
            argv += ["--no-database", "--interpreter", policy, "--out", str(out)]
            sides[name] = run_side(tree, argv, child_env(tree, tmp / cache)) | census(out, kernel)
            print(f"{name:<10} {sides[name]}", flush=True)
    return {
        "command": f"python benchmarks/interpreter_run.py --candidate {candidate} --kernel {kernel} "
        f"--examples {examples} --seed {seed}",
        "candidate": candidate,
        "sides": sides,
        "cpu_ratio_faithful_to_fast_cold": sides["faithful"]["cpu_s"] / sides["fast_cold"]["cpu_s"],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--candidate", default="HEAD", help="git revision (default HEAD)")
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--examples", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "interpreter_run.json")
    args = p.parse_args()
    doc = measure(args.candidate, args.kernel, args.examples, args.seed)
    from harness.store.files import atomic_write_json

    atomic_write_json(args.out, doc)
    print(f"CPU seconds, faithful / fast (cold cache): {doc['cpu_ratio_faithful_to_fast_cold']:.2f} -> {args.out}")


if __name__ == "__main__":
    main()
