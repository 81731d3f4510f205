"""What the program outline costs the compile: the seconds to outline each job's optimized program
(harness.tpu.outline.outline: the HLO text printed and read, the kernel names read from the
lowering) beside the seconds to compile it, for every shape, pass and TPU generation `compile` uses.

Each job is lowered and compiled once in this process (caches cleared between jobs, as the compile
worker does), and outlined three times; the outline's figure is the median of the three.

    python benchmarks/outline_cost.py [--kernel K ...] [--topology T ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402,F401 - JAX platform set-up before jax is imported
from harness.core import contract, shapes  # noqa: E402
from harness.runtime import compat  # noqa: E402
from harness.tpu import compile as aot  # noqa: E402
from harness.tpu import mosaic, outline  # noqa: E402

OUTLINES = 3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", action="append", default=None)
    p.add_argument("--topology", action="append", default=None)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "outline_cost.json")
    args = p.parse_args()
    import jax
    from jax.sharding import SingleDeviceSharding

    rows = []
    kernels = args.kernel or ["pallas_flash", "pallas_splash"]
    for job in aot.plan(kernels, shapes.get(None), args.topology or aot.TOPOLOGIES):
        jax.clear_caches()
        impl, shape = contract.resolve(job.kernel), shapes.SHAPES[job.shape]
        f = impl.jax_fn(shape.case)
        args_ = aot.abstract_args(shape.case, SingleDeviceSharding(compat.tpu_compile_device(job.topology)))
        lowered, compiled, times = mosaic.staged(f if job.pass_ == "fwd" else aot.with_backward(f), args_)
        spent = []
        for _ in range(OUTLINES):
            start = time.perf_counter()
            o = outline.outline(lowered, compiled)
            spent.append(time.perf_counter() - start)
        row = {
            **job.to_json(),
            "compile_s": times["compile"],
            "lower_s": times["lower"],
            "outline_s": statistics.median(spent),
            "kernels": [k.label for k in o.kernels],
            "ops": len(o.ops),
            "outside_share": o.outside_share,
            "relayouts": sum(op.relayout for op in o.ops),
        }
        rows.append(row)
        print(
            f"{job.kernel:<14} {job.topology:<10} {job.shape:<22} {job.pass_:<7} compile {row['compile_s']:6.2f}s "
            f"outline {row['outline_s'] * 1e3:6.1f}ms  ops {row['ops']:2d} outside {row['outside_share']:.0%}",
            flush=True,
        )
    total_o, total_c = sum(r["outline_s"] for r in rows), sum(r["compile_s"] for r in rows)
    summary = {
        "jobs": len(rows),
        "outline_s_total": total_o,
        "compile_s_total": total_c,
        "outline_over_compile": total_o / total_c,
        "outline_s_max": max(r["outline_s"] for r in rows),
        "versions": compat.library_versions(),
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "versions"}))
    args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
