"""Synthetic records that follow harness.record's schema exactly, for tests and the report benchmark.

Each builder returns one record dict; `write_store` lays them out as a store
(STORE/records/<run_id>/<name>.json) the way RunStore and the compile/bench writers do.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.case import Case
from harness.masks import Mask
from harness.record import RECORD_SCHEMA

VERSIONS = {
    "python": "3.11.9",
    "jax": "0.10.2",
    "jaxlib": "0.10.2",
    "libtpu": "0.0.52",
    "torch": "2.13.0",
    "numpy": "2.4.6",
    "hypothesis": "6.140.0",
    "harness": "0.1.0",
}
MACHINE = {"host": "ci-runner-1", "platform": "Linux-6.1-x86_64", "processor": "x86_64", "cpus": 2}
MEMORY = {"argument": 1_048_576, "output": 524_288, "temp": 2_097_152, "generated_code": 65_536, "alias": 0}
COST = {"flops": 2.1e9, "bytes_accessed": 3.4e6, "transcendentals": 1.6e7, "optimal_seconds": 2.4e-5}
QUANTITIES = ("out", "dq", "dk", "dv")


def run_record(
    run_id: str, *, versions: dict[str, Any] | None = None, machine: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "schema": RECORD_SCHEMA,
        "kind": "run",
        "run_id": run_id,
        "versions": {**VERSIONS, **(versions or {})},
        "machine": {**MACHINE, **(machine or {})},
        "command": ["python", "-m", "harness", "run", "--profile", "ci"],
        "profile": "ci",
        "kernels": ["pallas_flash"],
        "status": "finished",
        **extra,
    }


def case(seed: int = 0, *, dtype: str = "float32", causal: bool = False, q_len: int = 128, **kw: Any) -> Case:
    mask = Mask(causal="top_left") if causal else Mask()
    fields = dict(batch=1, q_heads=2, kv_heads=1, q_len=q_len, kv_len=128, head_dim=64, dtype=dtype, mask=mask)
    return Case(**{**fields, "seed": seed, **kw})


def comparison(quantity: str, used: float, *, ratio: float = 1.1, bound: float = 1e-5, note: str = "") -> dict:
    """A Comparison.to_json() dict whose max_abs is `used` x its bound."""
    err = used * bound
    num = lambda x: x if math.isfinite(x) else str(x)  # noqa: E731 - as Comparison.to_json stores inf
    return {
        "quantity": quantity,
        "max_abs": num(err),
        "max_rel": num(err * 2),
        "oracle_abs": bound / 3,
        "ratio": num(ratio),
        "bound": bound,
        "passed": bool(used <= 1),
        "note": note,
    }


def case_record(
    run_id: str,
    c: Case,
    *,
    implementation: str = "pallas_flash",
    role: str = "kernel",
    backend: str = "tpu_interpret",
    used: float = 0.3,
    error: str | None = None,
    fail_quantity: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One implementation on one case; failing when `error` or `fail_quantity` (that quantity at 5x its bound)."""
    comps = [] if error else [comparison(q, 5.0 if q == fail_quantity else used) for q in QUANTITIES]
    passed = error is None and fail_quantity is None
    return {
        "schema": RECORD_SCHEMA,
        "kind": "case",
        "run_id": run_id,
        "time": "2026-11-29T12:00:00+00:00",
        "case_id": c.case_id,
        "case": c.to_json(),
        "implementation": implementation,
        "role": role,
        "backend": backend,
        "empty_rows": "uniform" if role == "kernel" else "zeros",
        "passed": passed,
        "error": error,
        "traceback": "Traceback (most recent call last):\n  ...\n" + error if error else None,
        "comparisons": comps,
        "seconds": 2.5,
        "tolerance_version": 1,
        **extra,
    }


def bench_record(
    run_id: str,
    samples: list[float],
    *,
    implementation: str = "pallas_flash",
    shape: str = "mha_f32_256",
    pass_: str = "fwd",
    backend: str = "tpu_interpret",
) -> dict[str, Any]:
    return {
        "schema": RECORD_SCHEMA,
        "kind": "bench",
        "run_id": run_id,
        "time": "2026-11-29T12:00:00+00:00",
        "implementation": implementation,
        "backend": backend,
        "shape": {"name": shape, "case": case().to_json()},
        "pass": pass_,
        "samples": list(samples),
        "peak_rss_bytes": 900_000_000,
        "device_peak_bytes": None,
    }


def compile_record(
    run_id: str,
    *,
    implementation: str = "pallas_flash",
    topology: str = "v5e:1x1",
    shape: str = "mha_f32_256",
    pass_: str = "fwd",
    ok: bool = True,
    memory: dict[str, int] | None = None,
    error: str | None = None,
    failure_file: str | None = None,
) -> dict[str, Any]:
    c = case()
    return {
        "schema": RECORD_SCHEMA,
        "kind": "compile",
        "run_id": run_id,
        "time": "2026-11-29T12:00:00+00:00",
        "implementation": implementation,
        "backend": "tpu_compile_only",
        "topology": topology,
        "shape": {"name": shape, "case": c.to_json()},
        "case_id": c.case_id,
        "pass": pass_,
        "ok": ok,
        "passed": ok,
        "error": error,
        "memory": {**MEMORY, **(memory or {})} if ok else {},
        "cost": dict(COST) if ok else {},
        "seconds": 1.5,
        "failure_file": failure_file,
    }


def timings(median: float, n: int = 8, *, spread: float = 0.02, seed: int = 0) -> list[float]:
    """n deterministic samples around `median`, within +-spread (relative)."""
    return [median * (1 + spread * (((i * 7919 + seed * 104729) % 97) / 48.0 - 1)) for i in range(n)]


def record_name(rec: dict[str, Any]) -> str:
    kind = rec["kind"]
    if kind == "run":
        return "run"
    if kind == "case":
        return f"{rec['case_id']}--{rec['implementation']}"
    shape = rec["shape"]["name"]
    if kind == "bench":
        return f"bench--{rec['implementation']}--{shape}--{rec['pass']}"
    return f"compile--{rec['implementation']}--{rec['topology']}--{shape}--{rec['pass']}"


def write_store(root: Path | str, records: Iterable[dict[str, Any]]) -> Path:
    """Write records as a store, named as the harness writers name them (made file-safe as they do)."""
    root = Path(root)
    for rec in records:
        d = root / "records" / rec["run_id"]
        os.makedirs(d, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", record_name(rec))
        with open(d / f"{name}.json", "w") as f:
            json.dump(rec, f, indent=1, sort_keys=True)
    return root


def environment(
    run_id: str,
    *,
    versions: dict[str, Any] | None = None,
    seeds: range = range(6),
    fail_seed: int | None = None,
    bench_median: float = 0.010,
    temp: int = MEMORY["temp"],
    n_samples: int = 8,
) -> list[dict[str, Any]]:
    """A small but complete run: cases for the kernel and one oracle, a benchmark, compile checks.

    fail_seed: that case fails (out at 5x its bound) and is recorded as a shrunk failure.
    """
    recs = [run_record(run_id, versions=versions)]
    for s in seeds:
        for dtype in ("float32", "bfloat16"):
            c = case(s, dtype=dtype, causal=bool(s % 2))
            extra = {}
            fail = None
            if s == fail_seed and dtype == "float32":
                fail = "out"
                extra = {"shrunk": True, "failure_file": f"/nonexistent/store/failures/{c.case_id}-abc123.json"}
            recs.append(case_record(run_id, c, fail_quantity=fail, used=0.1 + 0.05 * s, **extra))
            recs.append(case_record(run_id, c, implementation="torch_sdpa", role="oracle", backend="cpu", used=0.2))
    for pass_ in ("fwd", "fwd_bwd"):
        scale = 1.0 if pass_ == "fwd" else 3.0
        recs.append(bench_record(run_id, timings(bench_median * scale, n_samples), pass_=pass_))
        for topology in ("v5e:1x1", "v6e:1x1"):
            recs.append(compile_record(run_id, topology=topology, pass_=pass_, memory={"temp": temp}))
    return recs
