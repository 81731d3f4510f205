"""Pairwise coverage of declared features in the first 60 cases of a run, per kernel, in seconds.

The cases a run draws depend only on the search (profile, seed, smoke cases) and on each
case passing: so the search runs with `runner.run_case` replaced by one that passes every
case at once, and draws exactly the cases a passing `python -m harness run` checks, in
order, without running a kernel. Printed and written: the share of declared pairs with
the smoke cases (as `run` does) and without (`--no-smoke`), and the pairs still missing.

    python benchmarks/pairwise.py [--kernel K ...] [--profile P] [--seed S] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402,F401 - JAX platform set-up before jax is imported
from harness.core import contract, features  # noqa: E402
from harness.running import runner, search  # noqa: E402
from harness.store.files import atomic_write_json  # noqa: E402


def _pass(case, subjects, **options) -> runner.CaseResult:  # noqa: ANN001 - runner.run_case's signature
    return runner.CaseResult(case=case, subjects=[])


def drawn(kernel: contract.Implementation, *, profile: str, seed: int | None, smoke: bool) -> list:
    """The first PAIRWISE_WITHIN cases a passing run of `kernel` checks."""
    real = search.runner.run_case
    search.runner.run_case = _pass
    try:
        outcome = search.search(kernel, [], examples=features.PAIRWISE_WITHIN, profile=profile, seed=seed, smoke=smoke)
    finally:
        search.runner.run_case = real
    return [r.case for r in outcome.results]


def measure(kernels: list[str], profile: str, seed: int | None) -> dict[str, Any]:
    rows = {}
    for name in kernels:
        kernel = contract.resolve(name)
        rows[name] = {
            mode: features.coverage(kernel, drawn(kernel, profile=profile, seed=seed, smoke=mode == "smoke")).to_json()
            for mode in ("smoke", "no_smoke")
        }
    return {
        "command": f"python benchmarks/pairwise.py --kernel {' --kernel '.join(kernels)} --profile {profile}"
        + ("" if seed is None else f" --seed {seed}"),
        "within": features.PAIRWISE_WITHIN,
        "kernels": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", action="append", help="default pallas_flash")
    p.add_argument("--profile", default="ci")
    p.add_argument("--seed", type=int)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pairwise.json")
    args = p.parse_args()
    doc = measure(args.kernel or ["pallas_flash"], args.profile, args.seed)
    atomic_write_json(args.out, doc)
    for name, modes in doc["kernels"].items():
        for mode, cov in modes.items():
            print(f"{name:<16} {mode:<9} {cov['pair_share']:.0%} ({cov['pairs']}/{cov['declared_pairs']} pairs, "
                  f"{cov['features']}/{cov['declared_features']} features) in {cov['cases']} cases")  # fmt: skip
            if cov["missing_pairs"]:
                print(f"{'':<27} missing: {', '.join(cov['missing_pairs'][:12])}")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
