"""Records for the report and gate tests: a store written by the real writers, and builders for variations.

`real_store` is a store written once per test session by the real
`python -m harness run`, `compile` and `bench` commands on tiny inputs. The builders build
the store's own record classes (harness.store.records) for the variations a test needs (a
speed regression, a version sort) and return their JSON, which a test may edit;
tests/test_report.py also holds them to the real records' fields. `write_store` lays records
out as a store, named as the writers name them (harness.store.files.record_name).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from harness.core.case import Case
from harness.core.compare import Comparison
from harness.core.masks import Mask
from harness.store.files import record_name
from harness.store.outline import KernelCall, Outline
from harness.store.records import BenchRecord, CaseRecord, CompileRecord, RunRecord, Shadow, from_json
from harness.tpu.mosaic import STAGES

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
# One Mosaic kernel as harness.tpu.mosaic.kernel_bodies reads it (no text: a body the report cannot show).
# The outline of the flash forward at mha_f32_256, as `compile` records it (harness.store.outline).
OUTLINE = Outline(
    kernels=(
        KernelCall(
            name="flash_attention.1",
            kernel_name="_flash_attention_kernel",
            op_name="jit(f)/jit(flash_attention)/pallas_call",
            bytes_read=786432,
            bytes_written=262144,
        ),
    )
)
KERNEL = {
    "sha256": "ab" * 32,
    "size": 5810,
    "cost_estimate": {"flops": 6.75e7, "transcendentals": 1.3e5},
    "text_z": None,
}


def run_record(
    run_id: str, *, versions: dict[str, Any] | None = None, machine: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    doc = RunRecord(
        run_id=run_id,
        versions={**VERSIONS, **(versions or {})},
        machine={**MACHINE, **(machine or {})},
        command=["python", "-m", "harness", "run", "--profile", "ci"],
        profile="ci",
        case_timeout=300.0,  # run's default time limit (harness.running.worker.DEFAULT_TIME_LIMIT_S)
        interpret={
            "check_grid_order": False,
            "detect_races": False,
            "random_seed": None,
            "uninitialized_memory": "nan",
            "interpreter": "fast",
        },
        cannot_run={},
        status="finished",
        # What each wrapped API has where the run ran (harness.core.coverage.Api.presence).
        api_parameters={
            "pallas_flash": {
                "flash_attention.flash_attention": {
                    "installed": True,
                    "drawn": ["q", "k", "v", "ab", "segment_ids", "causal", "sm_scale", "block_sizes"],
                    "present": ["q", "k", "v", "ab", "segment_ids", "causal", "sm_scale", "block_sizes", "debug"],
                    "absent": [],
                    "undeclared": [],
                }
            }
        },
        more={
            "kernels": ["pallas_flash"],
            "summary": [
                {
                    "kernel": "pallas_flash",
                    "examples": 12,
                    "failed": 0,
                    "seconds": 30.0,
                    "status": "PASS",
                    "worst": 0.4,
                    # harness.core.features.Coverage.to_json of the run's first cases.
                    "pairwise": {
                        "cases": 12,
                        "features": 14,
                        "declared_features": 15,
                        "pairs": 80,
                        "declared_pairs": 82,
                        "missing_pairs": ["dtype:float16 + mask:segments", "mask:bias + tiling:several_minor"],
                        "pair_share": 80 / 82,
                    },
                }
            ],
            "placement": {"references": "cpu:0", "pallas_flash": "cpu:0", "torch_sdpa": "cpu"},
        },
    ).to_json()
    # As `run` writes it: with no --case-timeout, case_timeout is the default limit (null only with --in-process).
    return {**doc, **extra}


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
    return CaseRecord(
        run_id=run_id,
        time="2026-11-29T12:00:00+00:00",
        case_id=c.case_id,
        case=c.to_json(),
        implementation=implementation,
        role=role,
        backend=backend,
        device="cpu:0" if role == "kernel" or implementation == "jax_reference" else "cpu",
        native=None,
        digest=None if error else f"{c.case_id}-{implementation}-{used}",
        empty_rows="uniform" if role == "kernel" else "zeros",
        passed=passed,
        error=error,
        traceback="Traceback (most recent call last):\n  ...\n" + error if error else None,
        comparisons=[Comparison.from_json(c) for c in comps],
        seconds=2.5,
        tolerance_version=1,
        **{
            # The drawn API parameters the case exercised (harness.core.coverage.exercised), "API.param".
            "exercised": [f"flash_attention.flash_attention.{p}" for p in ("q", "k", "v")] if role == "kernel" else [],
            # The checks beyond the truth that ran (harness.core.coverage.CHECKS).
            "checks": ["reproducible"] if role == "kernel" else [],
            **extra,
            # A shadow given as its JSON (as a test writes it) is typed as the record holds it.
            **({"shadow": Shadow.from_json(extra["shadow"])} if isinstance(extra.get("shadow"), dict) else {}),
        },
    ).to_json()


def bench_record(
    run_id: str,
    samples: list[float],
    *,
    implementation: str = "pallas_flash",
    shape: str = "mha_f32_256",
    pass_: str = "fwd",
    backend: str = "tpu_interpret",
) -> dict[str, Any]:
    return BenchRecord(
        run_id=run_id,
        time="2026-11-29T12:00:00+00:00",
        implementation=implementation,
        backend=backend,
        # As benchmarks/test_speed.py records it (Implementation.device); native timings on the chip.
        device="tpu:0 (TPU v5 lite)" if backend == "tpu" else "cpu:0",
        note="",
        timed="jit",
        shape={"name": shape, "case": case().to_json()},
        pass_=pass_,
        passed=True,
        samples=list(samples),
        stats={
            "min": min(samples),
            "max": max(samples),
            "mean": statistics.fmean(samples),
            "median": statistics.median(samples),
            "stddev": statistics.stdev(samples) if len(samples) > 1 else 0.0,
            "rounds": len(samples),
        },
        peak_rss_bytes=900_000_000,
        device_peak_bytes=None,
        benchmark=f"benchmarks/test_speed.py::test_speed[{implementation}-{shape}-{pass_}]",
        gc_disabled=True,  # bench passes --benchmark-disable-gc
    ).to_json()


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
    samples: dict[str, list[float]] | None = None,
    kernels: list[dict[str, Any]] | None = None,
    outline: Outline | None = OUTLINE,
) -> dict[str, Any]:
    c = case()
    samples = {stage: [0.1, 0.11, 0.105, 0.12, 0.095] for stage in STAGES} if samples is None else samples
    kernels = [KERNEL] if kernels is None else kernels
    return CompileRecord(
        run_id=run_id,
        time="2026-11-29T12:00:00+00:00",
        implementation=implementation,
        topology=topology,
        shape={"name": shape, "case": c.to_json()},
        case_id=c.case_id,
        pass_=pass_,
        ok=ok,
        passed=ok,
        error=error,
        memory={**MEMORY, **(memory or {})} if ok else {},
        cost=dict(COST) if ok else {},
        seconds=1.5,
        failure_file=failure_file,
        times={stage: statistics.median(v) for stage, v in samples.items()} if ok else {},
        samples=samples if ok else {},
        kernels=kernels if ok else [],
        deterministic=True if ok else None,
        outline=outline if ok else None,
    ).to_json()


def timings(median: float, n: int = 8, *, spread: float = 0.02, seed: int = 0) -> list[float]:
    """n deterministic samples around `median`, within +-spread (relative)."""
    return [median * (1 + spread * (((i * 7919 + seed * 104729) % 97) / 48.0 - 1)) for i in range(n)]


def write_store(root: Path | str, records: Iterable[dict[str, Any]]) -> Path:
    """Write records as a store, named as the harness writers name them."""
    root = Path(root)
    for rec in records:
        d = root / "records" / rec["run_id"]
        os.makedirs(d, exist_ok=True)
        name = record_name(from_json(rec))
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
    bench_processes: int = 1,
) -> list[dict[str, Any]]:
    """A small but complete run: cases for the kernel and one oracle, a benchmark, compile checks.

    fail_seed: that case fails (out at 5x its bound) and is recorded as a shrunk failure.
    bench_processes: the benchmark timed in this many processes (runs `run_id`, then `run_id`-b1 ...,
    as `upgrade --bench-rounds` records them), n_samples calls each; the gate judges one per process.
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
    bench_runs = [run_id] + [f"{run_id}-b{i}" for i in range(1, bench_processes)]
    recs += [run_record(r, versions=versions) for r in bench_runs[1:]]
    for pass_ in ("fwd", "fwd_bwd"):
        scale = 1.0 if pass_ == "fwd" else 3.0
        for i, r in enumerate(bench_runs):
            recs.append(bench_record(r, timings(bench_median * scale, n_samples, seed=i), pass_=pass_))
        for topology in ("v5e:1x1", "v6e:1x1"):
            recs.append(compile_record(run_id, topology=topology, pass_=pass_, memory={"temp": temp}))
    return recs


# --- a store written by the real writers ---

# The cheapest real inputs: fake kernels (the reference in milliseconds; BROKEN fails on
# head_dim 64 with 32 keys, so the run records a shrunk failure and its failure file), one
# compile of the smallest shape on one topology, one benchmark of the fastest implementation.
WRITERS: dict[str, list[str]] = {
    "run": [
        "run",
        "--kernel",
        "tests._fakes:CORRECT",
        "--kernel",
        "tests._fakes:BROKEN",
        "--oracle",
        "torch_sdpa",
        "--examples",
        "3",
        # Seeded: the ci profile's derandomized draw moves with search's source; a seed's does not.
        "--seed",
        "1",
        "--no-database",
        # The drawn cases, not the smoke set: BROKEN fails only past the smallest cases; drawn whole,
        # as the pool's entries (harness.core.pool) come from the cheaper half, where BROKEN passes.
        "--no-smoke",
        "--no-pool",
        "--max-shrinks",
        "3",
    ],
    # Two compile processes, not the default five: enough for a `deterministic` verdict and samples per stage.
    "compile": ["compile", "--topology", "v5e:1x1", "--shape", "mha_f32_256", "--pass", "fwd", "--repeat", "2"],
    "bench": ["bench", "--shape", "mha_f32_256", "-k", "jax_xla and not bwd"],
}
# Exit codes of the commands above: the run finds BROKEN's failure (1); the others pass (0).
WRITER_EXIT = {"run": 1, "compile": 0, "bench": 0}


def write_real_store(root: Path) -> Path:
    """Run each command of WRITERS into the store `root`, each in a fresh process as a user would."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    repo = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    for name, argv in WRITERS.items():
        cmd = [sys.executable, "-m", "harness", *argv, "--out", str(root)]
        done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
        if done.returncode != WRITER_EXIT[name]:
            raise AssertionError(
                f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
    return root


_written: dict[str, Path] = {}


def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store of WRITERS, written on first use and shared by every test module of the session, and by
    every pytest-xdist worker of it: the first to ask writes it (a minute of CPU), the others wait and read it.

    Test modules wrap it in a session fixture. Copy it (copy_store) before editing it.
    """
    if "store" not in _written:
        base = tmp_path_factory.getbasetemp()
        # Each xdist worker's base directory is a child of the run's: the store is written beside them.
        shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
        store, done = shared / "real-store", shared / "real-store.done"
        with open(shared / "real-store.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                # Written in place (its records name their own paths); a write that failed is written anew.
                shutil.rmtree(store, ignore_errors=True)
                write_real_store(store)
                done.touch()
        _written["store"] = store
    return _written["store"]


def copy_store(store: Path, dest: Path, *, drop: Any = lambda rec: False) -> Path:
    """A copy of `store` without the records for which `drop(record)` is true."""
    shutil.copytree(store, dest)
    for path in (dest / "records").glob("*/*.json"):
        if drop(json.loads(path.read_text())):
            path.unlink()
    return dest


def repeat_bench_runs(store: Path, processes: int) -> Path:
    """Every bench run of `store` copied so that each benchmark was timed in `processes` processes, as
    `upgrade --bench-rounds` records them (the gate judges one sample per process): run ids -b1, -b2 ..."""
    records = store / "records"
    for run in sorted(d for d in records.iterdir() if d.is_dir()):
        meta = json.loads((run / "run.json").read_text()) if (run / "run.json").exists() else {}
        if meta.get("mode") != "bench":
            continue
        for i in range(1, processes):
            dest = records / f"{run.name}-b{i}"
            shutil.copytree(run, dest)
            for path in dest.glob("*.json"):
                rec = json.loads(path.read_text())
                rec["run_id"] = dest.name
                if rec.get("kind") == "bench":  # another process: other timings, spread as the first's
                    rec["samples"] = [x * (1 + 0.01 * ((i * 37 + j) % 7 - 3)) for j, x in enumerate(rec["samples"])]
                path.write_text(json.dumps(rec))
    return store


def real_records(store: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((store / "records").glob("*/*.json"))]
