"""XLA's CPU optimization level for the kernel's worker (harness.running.worker.CPU_OPT_LEVEL).

A child process per (round, level) runs the kernels' smoke cases through
harness.running.execute.execute under the fast interpreter, as the worker does, with
`XLA_FLAGS=--xla_backend_optimization_level=L`: each case once (its program compiled: the
first call) and once more (the program reused). Rounds alternate the levels, so whatever else
the machine does falls on both. Written: per level the median CPU seconds of the first calls
and of the reruns (the child's own user + system time), and whether every output and gradient
is bitwise the same at both levels.

    python benchmarks/worker_xla_opt.py [--kernel pallas_flash --kernel pallas_splash]
                                        [--levels 3 1] [--rounds 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FLAG = "--xla_backend_optimization_level"


def child(kernels: list[str]) -> dict[str, Any]:
    import numpy as np

    import harness  # noqa: F401 - JAX platform set-up before jax is imported
    from harness.core import contract
    from harness.core.inputs import make_inputs
    from harness.core.smoke import smoke_cases
    from harness.running.execute import execute
    from harness.runtime import compat

    fast = compat.InterpretOptions(interpreter="fast")
    first = rerun = 0.0
    digests: list[str] = []
    for name in kernels:
        impl = contract.resolve(name)
        for case in smoke_cases(impl):
            inputs = make_inputs(case)
            for n in range(2):
                t = time.process_time()
                got = execute(impl, case, inputs, grads=True, interpret=fast)
                spent = time.process_time() - t
                first, rerun = (first + spent, rerun) if n == 0 else (first, rerun + spent)
            h = hashlib.sha256(str(got.error).encode())
            for value in vars(got.outputs or object()).values():
                if isinstance(value, np.ndarray):
                    h.update(np.ascontiguousarray(value).tobytes())
            digests.append(h.hexdigest()[:16])
    return {"first_call_cpu_s": first, "rerun_cpu_s": rerun, "digests": digests}


def measure(kernels: list[str], levels: list[int], rounds: int) -> dict[str, Any]:
    runs: dict[int, list[dict[str, Any]]] = {level: [] for level in levels}
    for _ in range(rounds):
        for level in levels:
            env = {**os.environ, "XLA_FLAGS": f"{FLAG}={level}", "JAX_PLATFORMS": "cpu"}
            argv = [sys.executable, __file__, "--child", *[x for k in kernels for x in ("--kernel", k)]]
            out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
            runs[level].append(json.loads(out.strip().splitlines()[-1]))
    per_level = {
        str(level): {
            "first_call_cpu_s": statistics.median(r["first_call_cpu_s"] for r in rs),
            "rerun_cpu_s": statistics.median(r["rerun_cpu_s"] for r in rs),
            "cases": len(rs[0]["digests"]),
        }
        for level, rs in runs.items()
    }
    base, low = str(levels[0]), str(levels[-1])
    return {
        "command": f"python benchmarks/worker_xla_opt.py {' '.join('--kernel ' + k for k in kernels)}"
        f" --levels {' '.join(map(str, levels))} --rounds {rounds}",
        "levels": per_level,
        "first_call_ratio": per_level[low]["first_call_cpu_s"] / per_level[base]["first_call_cpu_s"],
        "bitwise_same": all(r["digests"] == runs[levels[0]][0]["digests"] for rs in runs.values() for r in rs),
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", action="append", dest="kernels")
    p.add_argument("--levels", type=int, nargs="+", default=[3, 1])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "worker_xla_opt.json")
    args = p.parse_args()
    kernels = args.kernels or ["pallas_flash", "pallas_splash"]
    if args.child:
        print(json.dumps(child(kernels)))
        return
    doc = measure(kernels, args.levels, args.rounds)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
