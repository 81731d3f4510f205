"""The two Pallas TPU interpreters on one case: CPU seconds per call and agreement with the truth.

pallas_flash, fwd+bwd, B=1 H=2 L=512 D=128 causal float32 (issue 24's shape): the first call (trace
and compile) and then CALLS calls of the same program with new data, under the "fast" (HLO) and the
"faithful" (TPU interpret mode) interpreter, one after the other in this process; each call's
outputs are judged by the runner against the float64 truth, and the two interpreters' outputs are
compared with each other.

    python benchmarks/interpreters.py [--calls N] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

CALLS = 3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=CALLS)
    p.add_argument("--out", type=Path)
    args = p.parse_args()

    from harness.core.case import Case
    from harness.core.contract import QUANTITIES, resolve
    from harness.core.inputs import make_inputs
    from harness.core.masks import Mask
    from harness.running import runner
    from harness.running.execute import execute
    from harness.runtime import compat

    flash = resolve("pallas_flash")
    base = Case(batch=1, q_heads=2, kv_heads=2, q_len=512, kv_len=512, head_dim=128, mask=Mask(causal="top_left"))
    results: dict = {"case": base.to_json(), "versions": compat.library_versions(), "interpreters": {}}
    outputs = {}
    for interpreter in ("fast", "faithful"):
        options = compat.InterpretOptions(interpreter=interpreter)
        row: dict = {"calls_cpu_s": [], "worst_ratio_to_bound": []}
        for i in range(args.calls + 1):
            case = dataclasses.replace(base, seed=i)
            inputs = make_inputs(case)
            ref = runner.Reference.compute(case, inputs, grads=True)
            start = time.process_time()
            ex = execute(flash, case, inputs, grads=True, interpret=options)
            cpu = time.process_time() - start
            subject = runner.judge(flash, case, inputs, ex, ref)
            assert subject.passed, subject.failure
            if i == 0:
                row["first_call_cpu_s"] = cpu
            else:
                row["calls_cpu_s"].append(cpu)
            row["worst_ratio_to_bound"].append(max(c.max_abs / c.bound for c in subject.comparisons if c.bound))
            outputs.setdefault(interpreter, []).append(ex.outputs)
        row["errors_vs_truth"] = {c.quantity: c.max_abs for c in subject.comparisons}
        results["interpreters"][interpreter] = row
        print(interpreter, json.dumps(row))
    diff = 0.0
    for fast, faithful in zip(outputs["fast"], outputs["faithful"], strict=True):
        for q in QUANTITIES:
            a, b = fast.get(q), faithful.get(q)
            if a is not None and b is not None:
                diff = max(diff, float(abs(a - b).max()))
    results["max_abs_fast_vs_faithful"] = diff
    print("max |fast - faithful| over every quantity and call:", diff)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
