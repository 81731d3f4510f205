"""`upgrade --to NAME==VERSION ...`: should we take this release? Exit 0 safe, 1 not safe, 2 bad usage."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from harness import gate
from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.cli.commands._shared import add_out
from harness.cli.commands.bisect import ROOT, add_index_arguments, index_options, read_constraints
from harness.environments import envs, upgrade
from harness.gate import drift
from harness.gate.thresholds import Thresholds, load
from harness.report import compose
from harness.store import read as records

NAME = "upgrade"
HELP = "should we take this release: the suite, compile checks and benchmarks in a baseline and a candidate env, gated"
DEFAULT_OUT = Path("reports/upgrade")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--to",
        action="append",
        default=[],
        required=True,
        metavar="NAME==VERSION",
        help="a package of constraints/default.txt at another release (repeatable), e.g. jax==0.9.2",
    )
    b = p.add_argument_group("budget (the same on both sides)")
    b.add_argument(
        "--kernel", action="append", default=[], metavar="K", help="only these kernels (default: all on both)"
    )
    b.add_argument("--examples", type=int, default=3, metavar="N", help="cases per kernel, ci profile (default 3)")
    b.add_argument("--seed", type=int, default=0, metavar="S", help="Hypothesis seed (default 0)")
    b.add_argument("--case-timeout", type=float, metavar="S", help="per-case time limit (see `run`)")
    b.add_argument("--no-compile", action="store_true", help="skip the TPU compile checks")
    b.add_argument("--compile-shape", action="append", default=[], metavar="S", help="compile only these shapes")
    b.add_argument("--no-bench", action="store_true", help="skip the benchmarks")
    b.add_argument("--bench-shape", action="append", default=[], metavar="S", help="benchmark only these shapes")
    add_out(p, default=DEFAULT_OUT, what="stores, logs and report")
    p.add_argument("--thresholds", type=Path, metavar="FILE", help="gate thresholds TOML (default: the built-in file)")
    add_index_arguments(p)


def _environments(args: argparse.Namespace, changes: dict[str, str]) -> tuple[envs.Env, envs.Env]:
    constraints = read_constraints(args.constraints)
    index = index_options(args)
    change = " ".join(f"{k}=={v}" for k, v in changes.items())

    def spec(reqs: tuple[str, ...], label: str) -> envs.EnvSpec:
        return envs.EnvSpec(python=sys.executable, requirements=reqs, index=index, editable=(str(ROOT),), label=label)

    base = envs.build(spec(envs.requirements_with(constraints, {}), "baseline"), args.envs)
    cand = envs.build(spec(envs.requirements_with(constraints, changes), f"candidate ({change})"), args.envs)
    return base, cand


def _judge(stores: dict[str, Path], th: Thresholds) -> tuple[Any, gate.GateResult | None]:
    """The report and the gate's result, with drift replay files written first; (None, None) if a side has no store."""
    if not all((s / "records").is_dir() for s in stores.values()):
        return None, None
    base, cand = records.load([stores["baseline"]]), records.load([stores["candidate"]])
    pairs = drift.pair(base.cases, cand.cases)
    drift.write_replays(
        pairs, cand.cases, cand.runs, stores["candidate"], factor=th.drift_factor, min_used=th.drift_min_used
    )
    # Both sides name their own directories: no store to select from.
    return compose.make(
        records.Records(), thresholds=th, baseline=str(stores["baseline"]), candidate=str(stores["candidate"])
    )


def main(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    th = load(args.thresholds)
    changes = upgrade.targets(args.to, read_constraints(args.constraints))
    budget = upgrade.Budget(
        kernels=tuple(args.kernel),
        examples=args.examples,
        seed=args.seed,
        compile=not args.no_compile,
        compile_shapes=tuple(args.compile_shape),
        bench=not args.no_bench,
        bench_shapes=tuple(args.bench_shape),
        case_timeout=args.case_timeout,
    )
    base_env, cand_env = _environments(args, changes)
    base_kernels = upgrade.query(base_env, upgrade.KERNELS, cwd=ROOT)
    cand_kernels = upgrade.query(cand_env, upgrade.KERNELS, cwd=ROOT)
    base_versions = upgrade.query(base_env, upgrade.VERSIONS, cwd=ROOT)
    cand_versions = upgrade.query(cand_env, upgrade.VERSIONS, cwd=ROOT)
    change = ", ".join(
        f"{k} {base_versions.get(k)} -> {cand_versions.get(k)}"
        for k in base_versions
        if base_versions.get(k) != cand_versions.get(k)
    )
    both = [k for k in base_kernels if k in cand_kernels]
    wanted = list(budget.kernels) or both
    missing = [k for k in wanted if k not in both]
    if budget.kernels and missing:
        raise UsageError(f"--kernel {missing[0]} is not registered on both sides; on both: {', '.join(both)}")
    print(f"upgrade: {change}; kernels on both sides: {', '.join(wanted)}")
    for k in sorted(set(base_kernels) ^ set(cand_kernels)):
        print(f"  kernel {k} only in the {'baseline' if k in base_kernels else 'candidate'}: not compared")
    out = args.out.resolve()
    stores = {"baseline": out / "baseline", "candidate": out / "candidate"}
    for store in stores.values():
        if (store / "records").exists():
            raise UsageError(f"{store} already holds records; give another --out or remove it")
    results = []
    for side, env in (("baseline", base_env), ("candidate", cand_env)):
        plan = upgrade.steps(budget, wanted, stores[side])
        results += upgrade.run_side(side, env, plan, cwd=ROOT, logs=out / "logs")
    report, result = _judge(stores, th)
    gate_failed = result is not None and result.failed
    gate_reasons = [f"{r.category}: {r.subject}: {r.change}: {r.detail}" for r in result.failures] if result else []
    report_path = out / "index.html"
    lost = [k for k in base_kernels if k not in cand_kernels and (not budget.kernels or k in budget.kernels)]
    v = upgrade.verdict(
        change=change, gate_failed=gate_failed, gate_reasons=gate_reasons, steps=results, only_baseline=lost
    )
    if result is not None:
        report.title = v.headline
        compose.write(report, report_path)
    print(v.headline)
    for r in v.reasons:
        print(f"  - {r}")
    if result is not None:
        print(gate.format_table(result))
        print(f"report -> {report_path}")
    print(f"upgrade took {time.perf_counter() - start:.0f} s")
    return EXIT_OK if v.safe else EXIT_FAIL
