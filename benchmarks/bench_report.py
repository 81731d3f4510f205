"""Benchmark: seconds to render the HTML report from 10,000 records (target: under 5 s).

    PYTHONPATH=. python benchmarks/bench_report.py [--records 10000] [--repeat 3] [--out FILE]

Writes synthetic records that follow harness.store's schema (tests/record_builders.py) into a
temporary store: several library versions, each with case records for the kernel and an
oracle (a few failing, one shrunk), benchmark samples and compile records for four TPU
generations. Then times `python -m harness report` end to end in a fresh process (imports
included), twice: with runs that record their implementations' conventions in run.json, and
with runs that do not (today's run.json), where the report imports the registry (jax, torch)
to read them. Also times the load / data / render steps in this process. Prints and saves.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.gate import thresholds  # noqa: E402
from harness.report import conventions, data, render  # noqa: E402
from harness.store import read as records  # noqa: E402
from tests import record_builders as rb  # noqa: E402

VERSIONS = ["0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.0"]
TOPOLOGIES = ["v4:1x1x1", "v5e:1x1", "v5p:1x1x1", "v6e:1x1"]
SHAPES = ["mha_f32_256", "causal_bf16_512", "gqa_causal_bf16_2048", "long_causal_bf16_8192"]
CONVENTIONS = {
    "pallas_flash": {"bias": "(QK^T + ab) * sm_scale", "causal": "top-left", "gqa": "repeat", "empty_rows": "uniform"},
    "torch_sdpa": {"bias": "QK^T * scale + attn_mask", "causal": "dense", "gqa": "repeat", "empty_rows": "zeros"},
}
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


def _time_cli(store: Path, html: Path, repeat: int) -> dict:
    """Wall and CPU seconds (user + sys of the child) of `python -m harness report`, `repeat` times."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "harness", "report", "--store", str(store), "--out", str(html)]
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        walls.append(round(time.perf_counter() - start, 3))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3))
        if proc.returncode not in (0, 1):  # 1: the report shows the planted failures
            raise SystemExit(f"report failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return {
        "wall_seconds": walls,
        "wall_seconds_median": statistics.median(walls),
        "cpu_seconds": cpus,
        "cpu_seconds_median": statistics.median(cpus),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "report_render.json")
    args = p.parse_args()
    recs = synthetic(args.records)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        plain = rb.write_store(Path(tmp) / "plain", recs)
        for r in recs:  # the same records, with runs that record their conventions in run.json
            if r["kind"] == "run":
                r["conventions"] = CONVENTIONS
        recorded = rb.write_store(Path(tmp) / "recorded", recs)
        n = sum(1 for _ in plain.glob("records/*/*.json"))
        html = Path(tmp) / "index.html"
        cli_recorded = _time_cli(recorded, html, args.repeat)
        cli_plain = _time_cli(plain, html, args.repeat)
        # In-process steps (modules already imported): where the time goes.
        t0 = time.perf_counter()
        loaded = records.load([recorded])
        t1 = time.perf_counter()
        report = data.build(loaded, thresholds=thresholds.load(), conventions=conventions.collect(loaded))
        t2 = time.perf_counter()
        text = render.render(report)
        t3 = time.perf_counter()
        conventions.collect(records.load([plain]))  # the registry import, in a process that has jax already
        t4 = time.perf_counter()
    result = {
        "benchmark": "python -m harness report on a 10,000-record store",
        "records": n,
        "command": "python -m harness report --store STORE --out FILE",
        "target_seconds": 5.0,
        "runs_record_conventions": cli_recorded,
        "conventions_from_registry": cli_plain,
        "steps_seconds_in_process": {
            "load": round(t1 - t0, 3),
            "data": round(t2 - t1, 3),
            "render": round(t3 - t2, 3),
            "load + registry import for conventions": round(t4 - t3, 3),
        },
        "html_bytes": len(text.encode()),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_1min_at_end": round(os.getloadavg()[0], 2),
            "platform": platform.platform(),
        },
        "python": platform.python_version(),
        "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(result, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, key in (("conventions recorded", "runs_record_conventions"), ("registry", "conventions_from_registry")):
        r = result[key]
        print(
            f"{name}: median wall {r['wall_seconds_median']:.2f} s, CPU {r['cpu_seconds_median']:.2f} s for {n} records"
        )
    print(f"(target < 5 s) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
