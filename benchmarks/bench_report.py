"""Benchmark: seconds to render the HTML report from 10,000 records (target: under 5 s).

    PYTHONPATH=. python benchmarks/bench_report.py [--records 10000] [--repeat 3] [--out FILE]

Writes synthetic records that follow harness.record's schema (tests/record_builders.py) into a
temporary store: several library versions, each with case records for the kernel and an
oracle (a few failing, one shrunk), benchmark samples and compile records for four TPU
generations. Then times `python -m harness report` end to end in a fresh process (imports
included), and the load / data / render steps in this process. Prints and saves the figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import thresholds  # noqa: E402
from harness.report import conventions, data, records, render  # noqa: E402
from tests import record_builders as rb  # noqa: E402

VERSIONS = ["0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.0"]
TOPOLOGIES = ["v4:1x1x1", "v5e:1x1", "v5p:1x1x1", "v6e:1x1"]
SHAPES = ["mha_f32_256", "causal_bf16_512", "gqa_causal_bf16_2048", "long_causal_bf16_8192"]
IMPLS = [("pallas_flash", "kernel", "tpu_interpret"), ("torch_sdpa", "oracle", "cpu")]


def synthetic(n_records: int) -> list[dict]:
    """About n_records records over len(VERSIONS) environments; exactly n_records."""
    per_env = n_records // len(VERSIONS)
    out: list[dict] = []
    for e, version in enumerate(VERSIONS):
        run_id = f"2026112{e}T000000Z-bench-{e:06x}"
        env: list[dict] = [rb.run_record(run_id, versions={"jax": version, "jaxlib": version})]
        for i, (shape, pass_) in enumerate((s, p) for s in SHAPES for p in ("fwd", "fwd_bwd")):
            for impl, _, backend in IMPLS + [("jax_reference", "oracle", "cpu")]:
                median = 0.002 * (i + 1) * (1.0 + 0.04 * e)
                env.append(
                    rb.bench_record(
                        run_id,
                        rb.timings(median, 10, seed=e),
                        implementation=impl,
                        shape=shape,
                        pass_=pass_,
                        backend=backend,
                    )
                )
            for topo in TOPOLOGIES:
                temp = int(rb.MEMORY["temp"] * (i + 1) * (1.08 if e == len(VERSIONS) - 1 else 1.0))
                env.append(rb.compile_record(run_id, topology=topo, shape=shape, pass_=pass_, memory={"temp": temp}))
        seed = 0
        while len(env) < per_env + (n_records - per_env * len(VERSIONS) if e == 0 else 0):
            c = rb.case(
                seed,
                dtype=("float32", "bfloat16", "float16")[seed % 3],
                causal=bool(seed % 2),
                q_len=128 * (1 + seed % 4),
            )
            for impl, role, backend in IMPLS:
                fail = "dq" if role == "kernel" and e == 3 and seed % 97 == 5 else None
                extra = (
                    {"shrunk": True, "failure_file": f"store/failures/{c.case_id}.json"} if fail and seed == 5 else {}
                )
                env.append(
                    rb.case_record(
                        run_id,
                        c,
                        implementation=impl,
                        role=role,
                        backend=backend,
                        used=0.05 + (seed % 17) / 20,
                        fail_quantity=fail,
                        **extra,
                    )
                )
            seed += 1
        out.extend(env[: per_env + (n_records - per_env * len(VERSIONS) if e == 0 else 0)])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "report_render.json")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        store = rb.write_store(Path(tmp) / "store", synthetic(args.records))
        n = sum(1 for _ in store.glob("records/*/*.json"))
        html = Path(tmp) / "index.html"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
        cmd = [sys.executable, "-m", "harness", "report", "--store", str(store), "--out", str(html)]
        walls = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            walls.append(time.perf_counter() - start)
            if proc.returncode not in (0, 1):
                print(proc.stdout, proc.stderr, file=sys.stderr)
                return 2
        # In-process steps (modules already imported): where the time goes.
        t0 = time.perf_counter()
        recs = records.load([store])
        t1 = time.perf_counter()
        conv = conventions.collect(recs)
        t2 = time.perf_counter()
        report = data.build(recs, thresholds=thresholds.load(), conventions=conv)
        t3 = time.perf_counter()
        text = render.render(report)
        t4 = time.perf_counter()
        result = {
            "benchmark": "python -m harness report, 10,000-record store",
            "records": n,
            "command": " ".join(["python", "-m", "harness", "report", "--store", "STORE", "--out", "FILE"]),
            "wall_seconds": walls,
            "wall_seconds_median": statistics.median(walls),
            "target_seconds": 5.0,
            "steps_seconds": {
                "load": t1 - t0,
                "conventions (registry import: runs do not record conventions)": t2 - t1,
                "data": t3 - t2,
                "render": t4 - t3,
            },
            "html_bytes": len(text.encode()),
            "machine": {"cpus": os.cpu_count(), "loadavg_1min": os.getloadavg()[0], "platform": platform.platform()},
            "python": platform.python_version(),
            "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    print(json.dumps(result, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"median {result['wall_seconds_median']:.2f} s for {n} records (target < 5 s) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
