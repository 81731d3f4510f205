"""The main job's cases in its wall time: `run` as `nox -s tpu` starts it, this checkout against a baseline.

`nox -s tpu` on a CPU host runs `python -m harness run` with the `dev` profile: 10 cases of
`pallas_flash` before issue 17, 50 now. Each side runs that command (with `--seed S`, so both
draw repeatably; each its own default of cases and of worker processes) as a child process
from `git archive REV` with an empty compilation cache, as on a fresh machine; the candidate
runs a second time with the cache the first filled (a developer's next run). Recorded: cases,
wall seconds, CPU seconds (the child and its workers, os.wait4), and the candidate's cases in
the baseline's wall time.

    python benchmarks/default_run.py [--baseline REV] [--candidate REV] [--seed S] [--out FILE]
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

from benchmarks.throughput import DEFAULT_BASELINE, _commit, checkout, child_env, run_side  # noqa: E402


def measure(baseline: str, candidate: str, seed: int) -> dict[str, Any]:
    baseline, candidate = _commit(baseline), _commit(candidate)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = {"baseline": checkout(baseline, tmp), "candidate": checkout(candidate, tmp)}
        sides = {}
        for name, tree, cache in (
            ("baseline", trees["baseline"], "cache-baseline"),
            ("candidate_cold", trees["candidate"], "cache-candidate"),
            ("candidate_warm", trees["candidate"], "cache-candidate"),
        ):
            # What `nox -s tpu` passes: nothing but the user's arguments; the profile is dev.
            env = child_env(tree, tmp / cache, ATTN_HARNESS_PROFILE=None, ATTN_HARNESS_JOBS=None)
            argv = ["run", "--seed", str(seed), "--no-database", "--out", str(tmp / f"store-{name}")]
            sides[name] = run_side(tree, argv, env)
            print(f"{name:<15} {sides[name]}", flush=True)
    base = sides["baseline"]
    per_wall = {k: v["cases"] / v["wall_s"] for k, v in sides.items()}
    return {
        "command": f"python benchmarks/default_run.py --baseline {baseline} --candidate {candidate} --seed {seed}",
        "baseline": baseline,
        "candidate": candidate,
        "sides": sides,
        # Cases the candidate checks in the wall time the baseline took for its cases.
        "cases_in_baseline_time_cold": per_wall["candidate_cold"] * base["wall_s"],
        "cases_in_baseline_time_warm": per_wall["candidate_warm"] * base["wall_s"],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default=DEFAULT_BASELINE, help=f"git revision (default {DEFAULT_BASELINE})")
    p.add_argument("--candidate", default="HEAD", help="git revision (default HEAD)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "default_run.json")
    args = p.parse_args()
    doc = measure(args.baseline, args.candidate, args.seed)
    from harness.store.files import atomic_write_json

    atomic_write_json(args.out, doc)
    base = doc["sides"]["baseline"]
    print(
        f"baseline: {base['cases']} cases in {base['wall_s']:.0f} s; candidate in that time: "
        f"{doc['cases_in_baseline_time_cold']:.0f} cases (cold cache), {doc['cases_in_baseline_time_warm']:.0f} (warm)"
        f" -> {args.out}"
    )


if __name__ == "__main__":
    main()
