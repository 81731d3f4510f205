"""Measured cost of a matrix cell's cases: the first N derandomized (ci) cases of every kernel registered
here, smoke cases first as `run` checks them (harness.core.smoke), each against the oracles the matrix
runs, as CPU seconds of this process (all threads). N is the kernel's matrix budget
(declared in its adapter: harness.core.contract.About.cases) unless --examples says otherwise.

The matrix draws derandomized cases, so a kernel's first N cases in a cell are the cases measured
here (for the same capabilities); their CPU time bounds their wall time on an otherwise idle
machine whatever the load now (wall time under load measures the load). Each kernel's About.cases
is chosen from these figures (tests/test_matrix.py holds it to them).

    python benchmarks/matrix_budget.py [--examples N] [--kernel K ...] [--out FILE] [--update]

--update measures only the kernels named and replaces their rows in FILE, keeping the others; each row
measured so carries its own time and versions (the file's are those of its last full measurement).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.cli.commands.run import RULER  # noqa: E402
from harness.core import contract, smoke  # noqa: E402
from harness.running.search import search  # noqa: E402
from harness.runtime import compat  # noqa: E402 - after the path set-up, so this checkout is measured
from harness.store.files import atomic_write_json  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "matrix_budget.json"
# The start of one `python -m harness run` process: imports and the registry (every kernel module).
STARTUP = "import harness.cli.commands.run; from harness.core import contract; contract.registry()"


def _startup_cpu_s() -> float:
    """CPU seconds of a fresh process that imports the CLI and every kernel, as each matrix step does."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", STARTUP], check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(kernel: contract.Implementation, oracles: list[contract.Implementation], examples: int) -> dict:
    """CPU and wall seconds of each of the kernel's first `examples` ci cases, smoke cases first (no shrinking)."""
    cpu, wall, cases = [], [], []
    last = {"cpu": time.process_time(), "wall": time.perf_counter()}

    def on_result(result) -> None:  # noqa: ANN001 - a harness.running.runner.CaseResult
        now_cpu, now_wall = time.process_time(), time.perf_counter()
        cpu.append(round(now_cpu - last["cpu"], 3))
        wall.append(round(now_wall - last["wall"], 3))
        cases.append(str(result.case))
        last.update(cpu=now_cpu, wall=now_wall)

    reason = kernel.cannot_run()
    if reason is not None:
        return {"cannot_run": reason, "cpu_s": [], "wall_s": [], "cases": []}
    # Finding the smoke set (Hypothesis's find) is paid once per process, before the first case;
    # the cannot-run probe above stays in the first case's figure, as before smoke cases.
    cpu0, wall0 = time.process_time(), time.perf_counter()
    smoke_cases = len(smoke.smoke_cases(kernel))
    smoke_cpu_s = round(time.process_time() - cpu0, 3)
    last["cpu"] += time.process_time() - cpu0
    last["wall"] += time.perf_counter() - wall0
    outcome = search(
        kernel,
        oracles,
        examples=examples,
        profile="ci",
        grads=kernel.capabilities.grads,
        shrink_runs=0,
        smoke=True,
        on_result=on_result,
    )
    failed = sum(not r.passed for r in outcome.results)
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "cases": cases,
        "failed": failed,
        "smoke_cases": smoke_cases,
        "smoke_cpu_s": smoke_cpu_s,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, help="cases per kernel (default its matrix budget)")
    p.add_argument("--kernel", action="append", help="kernels to measure (default every registered kernel)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--update", action="store_true", help="replace only the --kernel rows in --out, keep the rest")
    args = p.parse_args()
    if args.update and not (args.kernel and args.out.is_file() and args.examples is None):
        p.error("--update needs --kernel, an existing --out to update, and each kernel's own budget (no --examples)")
    kernels = [contract.resolve(k) for k in args.kernel or contract.names("kernel")]
    oracles = [contract.resolve(o) for o in contract.names("oracle") if o != RULER]
    now = {"time": dt.datetime.now(dt.UTC).isoformat(), "versions": compat.library_versions()}
    if args.update:
        result = json.loads(args.out.read_text())
        here = [o.name for o in oracles]
        if result["oracles"] != here:
            p.error(f"--update: {args.out} measured against oracles {result['oracles']}, here {here}: measure all")
    else:
        result = {
            "benchmark": "matrix_budget",
            **now,
            "examples": args.examples or "matrix",
            "oracles": [o.name for o in oracles],
            "startup_cpu_s": round(_startup_cpu_s(), 2),
            "kernels": {},
        }
    for kernel in kernels:
        row = measure(kernel, oracles, args.examples or kernel.about.cases)
        result["kernels"][kernel.name] = {**row, **now} if args.update else row
        print(f"{kernel.name}: cpu {row['cpu_s']} s, wall {row['wall_s']} s", flush=True)
        atomic_write_json(args.out, result)  # after each kernel: a long measurement keeps what it has
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
