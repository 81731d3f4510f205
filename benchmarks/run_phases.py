"""Where a 60-case run's CPU goes, by phase: `run --examples 60 --seed 1 --jobs 1` of the default kernel,
run three times in child processes: "cold" (an empty persistent compilation cache and probe cache, as on a
fresh machine), "warm" (the same command again with the caches the cold run filled) and "uncached" (the
persistent compilation cache off: every program compiled by XLA, the probe cache warm).

Every process of a run (the run's own, each kernel worker, each probe's worker) times its phases with
harness.runtime.phases ($ATTN_HARNESS_PHASES): CPU seconds (user+sys, its threads included) per phase,
a phase that made a JAX compile request kept apart as "<phase> compile". The run's own process is started
through this file (`--child`), which times the harness's steps from outside: the draw (Hypothesis and
the search's own bookkeeping), inputs, the references, comparisons, probes, the trigger search, records.
A run's total CPU is its process tree's (os.wait4); what no phase holds is its "unphased" row.

What a failure costs: "failing" is the same command with a planted-bug drop-in of the default kernel
(FAILING_KERNEL: its causal mask off by one; a drop-in draws its upstream's cases, so the two runs check
the same cases), run twice after "warm", so that its own programs are compiled once ("failing, first") and
the second run ("failing") pays what a failure adds to a warm run: shrinking (its candidates run in the
kernel's worker: the extra kernel calls and compiles there), and the trigger search and the settling
(replays, the known findings, upstream run on the shrunk case, the failure files), each a phase of its own.

Goals (issue 63): at least 40 distinct programs, at most GOAL_WARM_CPU_S on the warm run, the cold run
at most GOAL_COLD_RATIO times the warm one, and a failure adding at most the cost of the run without one
(the failing run at most GOAL_FAILING_RATIO times the warm one).

    python benchmarks/run_phases.py [--sides cold,warm,uncached,failing] [--out FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUN_ARGV = ["run", "--kernel", "pallas_flash", "--examples", "60", "--seed", "1", "--jobs", "1"]
KERNEL = "pallas_flash"
GOAL_PROGRAMS = 40
GOAL_WARM_CPU_S = 110.0
GOAL_COLD_RATIO = 1.3
GOAL_FAILING_RATIO = 2.0
FAILING_KERNEL = "tests.planted.fwd_causal_off_by_one:flash_attention"
SIDES = ("cold", "warm", "uncached", "failing")
# The runs a side is: "failing" runs once unmeasured first (its drop-in's own programs compiled), then measured.
RUNS = {"cold": ("cold",), "warm": ("warm",), "uncached": ("uncached",), "failing": ("failing, first", "failing")}
PASSING = ("cold", "warm", "uncached")
RUN_ROLE = "run"  # the run's own process; every other role is a worker's (the phase that started it)


# -- summarizing (pure) -------------------------------------------------------------------------------


def merge_phases(docs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The phases of a run's processes summed: "<where>: <phase>" -> {cpu_s, calls}; where is "run" or
    "worker <role>" (a kernel worker is "worker kernel-calls")."""
    out: dict[str, dict[str, float]] = collections.defaultdict(lambda: {"cpu_s": 0.0, "calls": 0})
    for doc in docs:
        where = doc["role"] if doc["role"] == RUN_ROLE else f"worker {doc['role']}"
        rows = {**doc["phases"], "unphased": {"cpu_s": doc["unphased_cpu_s"], "calls": 0}}
        for name, figures in rows.items():
            out[f"{where}: {name}"]["cpu_s"] += figures["cpu_s"]
            out[f"{where}: {name}"]["calls"] += figures["calls"]
    return {k: {"cpu_s": round(v["cpu_s"], 2), "calls": v["calls"]} for k, v in sorted(out.items())}


def compile_counts(docs: list[dict[str, Any]]) -> dict[str, float]:
    """JAX compile requests of the run's processes, how many the persistent cache served, and the wall
    seconds of each compile step ("workers_wall_s_trace"), per process kind."""
    out: collections.Counter[str] = collections.Counter()
    for doc in docs:
        where = "run" if doc["role"] == RUN_ROLE else "workers"
        out[f"{where}_compile_requests"] += doc["compile_requests"]
        out[f"{where}_cache_hits"] += doc["cache_hits"]
        for step, seconds in doc.get("compile_wall_s", {}).items():
            out[f"{where}_wall_s_{step}"] = round(out[f"{where}_wall_s_{step}"] + seconds, 2)
    return dict(sorted(out.items()))


def compile_floor(cold: dict[str, Any], warm: dict[str, Any]) -> float:
    """CPU seconds the cold run's compile phases spent beyond the warm run's: XLA compiling the programs the
    persistent cache had not seen yet. Tracing and lowering are paid by both runs, so no run on empty caches
    costs less than the warm run plus this: the compile floor."""
    cold_phases, warm_phases = cold.get("phases", {}), warm.get("phases", {})
    extra = (
        cold_phases[k]["cpu_s"] - warm_phases.get(k, {}).get("cpu_s", 0.0) for k in cold_phases if k.endswith("compile")
    )
    return round(sum(max(0.0, x) for x in extra), 1)


def goal(sides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's three figures and whether each is met (None where a side was not run), and whether
    every run came to the same verdicts."""
    warm, cold, failing = sides.get("warm"), sides.get("cold"), sides.get("failing")
    programs = (warm or cold or {}).get("programs")
    ratio = cold["cpu_s"] / warm["cpu_s"] if warm and cold else None
    failing_ratio = failing["cpu_s"] / warm["cpu_s"] if warm and failing else None
    floor = compile_floor(cold, warm) if warm and cold else None
    return {
        "programs": programs,
        "programs_met": None if programs is None else programs >= GOAL_PROGRAMS,
        "warm_cpu_s": warm and warm["cpu_s"],
        "warm_met": None if warm is None else warm["cpu_s"] <= GOAL_WARM_CPU_S,
        "warm_over_goal_s": None if warm is None else round(warm["cpu_s"] - GOAL_WARM_CPU_S, 1),
        "cold_over_warm": ratio and round(ratio, 3),
        "cold_met": None if ratio is None else ratio <= GOAL_COLD_RATIO,
        # How far the cold run is from the floor: 1.0 where all it costs beyond the warm run is fresh compiles.
        "compile_floor_cpu_s": floor,
        "cold_over_floor": None if floor is None else round(cold["cpu_s"] / (warm["cpu_s"] + floor), 3),
        "failing_over_warm": failing_ratio and round(failing_ratio, 3),
        "failing_met": None if failing_ratio is None else failing_ratio <= GOAL_FAILING_RATIO,
        # The caches change costs, never a verdict: every run of the default kernel passes and fails the same
        # records (the failing runs check a planted bug: theirs are their own).
        "same_verdicts": len({json.dumps(s.get("verdicts"), sort_keys=True) for n, s in sides.items() if n in PASSING})
        <= 1,
    }


def verdict_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Passed and failed records per implementation: "pallas_flash passed" -> n."""
    out: collections.Counter[str] = collections.Counter()
    for r in records:
        out[f"{r['implementation']} {'passed' if r['passed'] else 'failed'}"] += 1
    return dict(sorted(out.items()))


# -- measuring ----------------------------------------------------------------------------------------


def distinct_programs(records: list[dict[str, Any]]) -> int:
    """The kernel's distinct compiled programs over the run's cases (harness.core.pool.program_key)."""
    from harness.core import pool
    from harness.core.case import Case

    subjects = {KERNEL, FAILING_KERNEL}
    cases = {json.dumps(r["case"], sort_keys=True) for r in records if r["implementation"] in subjects}
    return len({pool.program_key(Case.from_json(json.loads(c))) for c in cases})


def _records(store: Path) -> list[dict[str, Any]]:
    """The run's case records (not its run.json)."""
    found = (json.loads(p.read_text()) for p in sorted(store.glob("records/*/*.json")))
    return [r for r in found if r.get("kind") == "case"]


def run_side(name: str, caches: Path, tmp: Path) -> dict[str, Any]:
    """One run in a child process: its exit code, CPU (process tree) and wall seconds, phases, programs."""
    slug = name.replace(", ", "-")
    phase_dir, store = tmp / f"phases-{slug}", tmp / f"store-{slug}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
        "ATTN_HARNESS_COMPILATION_CACHE": "off" if name == "uncached" else str(caches / "jax"),
        "ATTN_HARNESS_PROBE_CACHE": str(caches / "probes"),
        "ATTN_HARNESS_PHASES": str(phase_dir),
    }
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", *RUN_ARGV, "--out", str(store)]
    if name.startswith("failing"):
        argv[argv.index(KERNEL)] = FAILING_KERNEL
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    docs = [json.loads(p.read_text()) for p in sorted(phase_dir.glob("phases-*.json"))]
    records = _records(store)
    cpu = usage.ru_utime + usage.ru_stime
    phases = merge_phases(docs)
    return {
        "exit_code": os.waitstatus_to_exitcode(status),
        "cases": sum(line.startswith("[") for line in output.splitlines()),
        "programs": distinct_programs(records),
        "verdicts": verdict_counts(records),
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "processes": len(docs),
        "phased_cpu_s": round(sum(p["cpu_s"] for p in phases.values()), 2),
        "compiles": compile_counts(docs),
        "phases": phases,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "failures": len(list((store / "failures").glob("*.json"))),
        "output_tail": output.splitlines()[-6:],
    }


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True)
    return out.stdout.strip() + ("+uncommitted" if dirty.stdout.strip() else "")


def measure(sides: list[str]) -> dict[str, Any]:
    from harness.runtime import versions  # noqa: F401 - the same import path the run has

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in (run for side in sides for run in RUNS[side]):
            results[name] = run_side(name, tmp / "caches", tmp)
            r = results[name]
            print(f"{name:<14} {r['cpu_s']:.1f} CPU s, {r['wall_s']:.0f} s wall, {r['programs']} programs", flush=True)
    return {
        "benchmark": "run_phases",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": {"machine": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
        "versions": _versions(),
        "commit": _commit(),
        "command": ["python", "-m", "harness", *RUN_ARGV],
        "runs": results,
        "goal": goal(results),
    }


def _versions() -> dict[str, str]:
    from importlib import metadata

    return {name: metadata.version(name) for name in ("jax", "jaxlib", "torch", "numpy", "hypothesis")}


# -- the run's own process ----------------------------------------------------------------------------


def _time_the_run_process() -> None:
    """Wrap the harness's steps in phases (harness.runtime.phases), from outside: a timing hook each."""
    from harness.running import exactness, probes, runner, search, sink, worker
    from harness.runtime.phases import timed

    search.Search.run_phase = timed("draw", search.Search.run_phase)
    search.Search.smoke_phase = timed("draw", search.Search.smoke_phase)
    search.Search.reduce_features = timed("trigger search", search.Search.reduce_features, scoped=True)
    runner.make_inputs = timed("inputs", runner.make_inputs)
    compute = runner.Reference.compute.__func__
    runner.Reference.compute = classmethod(timed("references", compute))
    runner.execute = timed("oracles", runner.execute)  # in this process: the oracles (the kernel's in a worker)
    worker.execute = timed("kernel calls", worker.execute)  # waiting for a worker
    runner.judge = timed("comparisons", runner.judge)
    runner._vs_faithful = timed("comparisons", runner._vs_faithful)
    probes.in_worker = timed("probes", probes.in_worker, scoped=True)
    exactness.refined = timed("probes", exactness.refined, scoped=True)
    sink.CaseRecorder.__call__ = timed("records", sink.CaseRecorder.__call__)
    _time_what_a_failure_adds()


def _time_what_a_failure_adds() -> None:
    """Settling's steps after the search (replays, the known findings, upstream on the shrunk case, the files), each
    a scope. Shrinking has none: its candidates run in the kernel's worker, so they show as the failing run's extra
    kernel calls and compiles there."""
    from harness.running import settle

    for method, name in SETTLE_PHASES.items():
        fn = getattr(settle.Settle, method, None)
        if fn is not None:  # a step settle no longer has is timed by the phases inside it
            setattr(settle.Settle, method, timed_scope(name, fn))


# harness.running.settle.Settle's steps, each a scope of the failing run's table.
SETTLE_PHASES = {
    "check_fast_refusal": "settle: fast refusal",
    "replay_failures": "settle: replays",
    "name_known": "settle: known findings",
    "write_failures": "settle: upstream alike and files",
}


def timed_scope(name: str, fn):  # noqa: ANN001, ANN201 - any callable
    from harness.runtime.phases import timed

    return timed(name, fn, scoped=True)


def child(argv: list[str]) -> int:
    """`python -m harness ARGV` in this process, its phases timed."""
    import torch  # noqa: F401 - the run's oracle imports it: a process's start-up, as jax's is

    import harness  # noqa: F401 - JAX platform set-up before jax is imported
    from harness.cli import main as cli_main
    from harness.runtime import phases

    phases.start(RUN_ROLE)
    _time_the_run_process()

    return cli_main(argv)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sides", default=",".join(SIDES), help=f"which runs, in order (default {','.join(SIDES)})")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "run_phases.json")
    args = p.parse_args()
    sides = [s for s in args.sides.split(",") if s]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        p.error(f"--sides {','.join(unknown)}: expected some of {','.join(SIDES)}")
    sys.path.insert(0, str(ROOT))
    doc = measure(sides)
    from harness.store.files import atomic_write_json

    atomic_write_json(args.out, doc)
    print(f"goal: {doc['goal']} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
