"""The references at the shapes a run draws: the float64 truth compiled (JAX) against numpy, and the ruler.

Draws N cases of the kernel (Hypothesis, derandomized) and, in that order in one process with JAX's
persistent compilation cache off (a cold run), times per case in CPU seconds (this process, XLA's
threads included): the compiled float64 truth (harness.core.reference.run_reference in float64: one
program per new shape and dtype, compiled on first use), the same truth in numpy float64
(harness.core.extended.attention, the code that computes a float64 case's truth in longdouble), and
the same-dtype ruler (compiled; it stays compiled: its error is what every tolerance is a factor of).
The two truths are compared (max abs difference over every quantity).

    python benchmarks/references.py [--kernel K] [--cases N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["ATTN_HARNESS_COMPILATION_CACHE"] = "off"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _drawn(kernel, n: int) -> list:
    from hypothesis import Phase, given, settings

    from harness.core import strategies

    cases = []

    @settings(max_examples=n, database=None, derandomize=True, phases=[Phase.generate], deadline=None)
    @given(strategies.cases(kernel))
    def collect(case) -> None:
        cases.append(case)

    collect()
    return cases[:n]


def _cpu(f):
    start = time.process_time()
    out = f()
    return time.process_time() - start, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", default="pallas_flash")
    p.add_argument("--cases", type=int, default=30)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "references.json")
    args = p.parse_args()

    import jax.numpy as jnp
    import numpy as np

    from harness.core import contract, extended, reference
    from harness.core.contract import QUANTITIES
    from harness.core.inputs import make_inputs
    from harness.runtime import compat
    from harness.store.files import atomic_write_json

    kernel = contract.resolve(args.kernel)
    rows = []
    for case in _drawn(kernel, args.cases):
        inputs = make_inputs(case)
        compiled_s, want = _cpu(lambda: reference.run_reference(case, inputs, grads=True, dtype=jnp.float64))  # noqa: B023
        again_s, _ = _cpu(lambda: reference.run_reference(case, inputs, grads=True, dtype=jnp.float64))  # noqa: B023
        numpy_s, got = _cpu(lambda: extended.attention(case, inputs, grads=True, dtype=np.float64))  # noqa: B023
        ruler_s, _ = _cpu(lambda: reference.run_reference(case, inputs, grads=True, dtype=inputs.q.dtype))  # noqa: B023
        diff = max(
            float(np.max(np.abs(got.get(q) - want.get(q))))
            for q in QUANTITIES
            if q != "lse" and got.get(q) is not None and want.get(q) is not None
        )
        rows.append(
            {
                "case": str(case),
                "truth_compiled_s": compiled_s,
                "truth_compiled_again_s": again_s,
                "truth_numpy_s": numpy_s,
                "ruler_s": ruler_s,
                "max_abs_numpy_vs_compiled": diff,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    total = {k: sum(r[k] for r in rows) for k in ("truth_compiled_s", "truth_numpy_s", "ruler_s")}
    doc = {
        "command": f"python benchmarks/references.py --kernel {args.kernel} --cases {args.cases}",
        "versions": compat.library_versions(),
        "totals_cpu_s": total,
        "distinct_shapes": len({(r["case"].split(" mask")[0]) for r in rows}),
        "max_abs_numpy_vs_compiled": max(r["max_abs_numpy_vs_compiled"] for r in rows),
        "cases": rows,
    }
    atomic_write_json(args.out, doc)
    print(json.dumps({k: v for k, v in doc.items() if k != "cases"}, indent=1))


if __name__ == "__main__":
    main()
