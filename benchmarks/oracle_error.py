"""How far an oracle's error strays from the ruler's: the factor each case needs under the tolerance rule.

For each case the rule is err <= factor x ruler_err + floor x magnitude (harness.core.compare);
this prints the factor the case needs, (err - floor x magnitude) / ruler_err, per shape:
its maximum, 99th percentile and median, and how many cases fail at the table's factor.
IMPLEMENTATION_FACTORS in harness/core/compare.py is set from these figures.

    python benchmarks/oracle_error.py [--oracle torch_sdpa] [--dtype float32] [--regime large]
        [--shape LQ,LK,D ...] [--seeds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.core.case import Case  # noqa: E402
from harness.core.compare import TOLERANCES, compare  # noqa: E402
from harness.core.contract import resolve  # noqa: E402
from harness.core.inputs import make_inputs  # noqa: E402
from harness.running.runner import Reference  # noqa: E402
from harness.runtime import compat  # noqa: E402
from harness.store.files import atomic_write_json  # noqa: E402


def needed_factors(oracle: str, dtype: str, regime: str, shape: tuple[int, int, int], seeds: int) -> dict:
    impl, (lq, lk, d) = resolve(oracle), shape
    tol = TOLERANCES[(dtype, "out")]
    needed, fails = [], 0
    for seed in range(seeds):
        scale = 1.0 if seed % 2 else None  # both an explicit scale and the default 1/sqrt(D)
        case = Case(
            batch=1, q_heads=2, kv_heads=2, q_len=lq, kv_len=lk, head_dim=d, dtype=dtype, regime=regime,
            scale=scale, seed=seed,
        )  # fmt: skip
        inputs = make_inputs(case)
        ref = Reference.compute(case, inputs, grads=False)
        got = impl.run(case, inputs, grads=False)
        c = compare("out", got.out, ref.truth.out, ref.ruler.out, tol, magnitude=ref.magnitudes["out"])
        fails += not c.passed
        magnitude = max(float(np.abs(ref.truth.out).max()), ref.magnitudes["out"])
        needed.append((c.max_abs - tol.floor * magnitude) / c.oracle_abs if c.oracle_abs else 0.0)
    xs = np.array(needed)
    return {
        "shape": f"Lq={lq} Lk={lk} D={d}",
        "cases": seeds,
        f"fail_at_factor_{tol.factor:g}": fails,
        "factor_max": float(xs.max()),
        "factor_p99": float(np.quantile(xs, 0.99)),
        "factor_p50": float(np.median(xs)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--oracle", default="torch_sdpa")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--regime", default="large")
    p.add_argument("--shape", action="append", help="LQ,LK,D (repeatable; default the issue-9 shape 32,16,32)")
    p.add_argument("--seeds", type=int, default=600)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "oracle_error.json")
    args = p.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shape or ["32,16,32"]]
    rows = []
    for shape in shapes:
        rows.append(needed_factors(args.oracle, args.dtype, args.regime, shape, args.seeds))
        print(rows[-1], flush=True)
    result = {
        "command": " ".join(["python", "benchmarks/oracle_error.py", *sys.argv[1:]]),
        "oracle": args.oracle,
        "dtype": args.dtype,
        "regime": args.regime,
        "shapes": rows,
        "versions": compat.library_versions(),
    }
    atomic_write_json(args.out, result)


if __name__ == "__main__":
    main()
