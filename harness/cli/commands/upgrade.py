"""`upgrade --to NAME==VERSION ...`: should we take this release?

Exit 0 safe, 1 not safe, 2 bad usage, 4 nothing could be compared here (every check not compared).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from harness import gate
from harness.cli import UsageError, progress, results
from harness.cli.commands._shared import add_out
from harness.cli.commands.bisect import (
    ROOT,
    add_index_arguments,
    add_python_argument,
    index_options,
    interpreter,
    read_constraints,
)
from harness.environments import envs, pythons, upgrade
from harness.gate import drift, verdict
from harness.gate.forks import upstream_of
from harness.gate.thresholds import Thresholds, load
from harness.report import compose, data
from harness.running import shards
from harness.store import read as records
from harness.upstream import candidate

NAME = "upgrade"
HELP = "should we take this release: the suite, compile checks and benchmarks in a baseline and a candidate env, gated"
DEFAULT_OUT = Path("reports/upgrade")
# Beside the report in --out, unless --junitxml or --json names another file.
JUNIT_NAME, SUMMARY_NAME = "junit.xml", "summary.json"


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
        "--kernel", action="append", default=[], metavar="K", help="only these kernels (default: all, either side)"
    )
    b.add_argument(
        "--examples",
        type=int,
        metavar="N",
        help="cases per kernel, ci profile (default: its smoke set and drawn cases, "
        f"harness.environments.matrix.EXAMPLES + {upgrade.EXTRA_DRAWN})",
    )
    b.add_argument("--seed", type=int, default=0, metavar="S", help="Hypothesis seed (default 0)")
    b.add_argument("--case-timeout", type=float, metavar="S", help="per-case time limit (see `run`)")
    b.add_argument("--no-compile", action="store_true", help="skip the TPU compile checks")
    b.add_argument("--compile-shape", action="append", default=[], metavar="S", help="compile only these shapes")
    b.add_argument("--no-bench", action="store_true", help="skip the benchmarks")
    b.add_argument("--bench-shape", action="append", default=[], metavar="S", help="benchmark only these shapes")
    b.add_argument(
        "--bench-rounds",
        type=int,
        default=upgrade.BENCH_ROUNDS,
        metavar="N",
        help="benchmark processes per side, alternating with the other side's; each is one sample of the "
        f"speed rule (default {upgrade.BENCH_ROUNDS})",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="run steps at once, both sides of a kernel side by side; compile and bench run alone "
        f"(default: ${shards.JOBS_ENV} or the number of cores)",
    )
    add_out(p, default=DEFAULT_OUT, what="stores, logs and report")
    results.add_arguments(
        p.add_argument_group("results for CI"), what="gate", defaults=(f"OUT/{JUNIT_NAME}", f"OUT/{SUMMARY_NAME}")
    )
    p.add_argument("--thresholds", type=Path, metavar="FILE", help="gate thresholds TOML (default: the built-in file)")
    add_python_argument(
        p, help="the candidate's interpreter (default: the first its pins install on, the baseline's tried first)"
    )
    add_python_argument(
        p,
        flag="--baseline-python",
        help="the baseline's interpreter (default: the first its pins install on, the constraints file's "
        "declared Pythons first)",
    )
    add_index_arguments(p)


def _environments(args: argparse.Namespace, changes: dict[str, str]) -> tuple[envs.Env, envs.Env]:
    constraints = read_constraints(args.constraints)
    index = index_options(args)
    change = " ".join(f"{k}=={v}" for k, v in changes.items())

    def spec(reqs: tuple[str, ...], label: str) -> envs.EnvSpec:
        return envs.EnvSpec(python=sys.executable, requirements=reqs, index=index, editable=(str(ROOT),), label=label)

    # Each side on the first Python its pins install on: the candidate tries the baseline's first, so that a
    # release that needs no other Python is gated with nothing else changed.
    if args.baseline_python:
        first = [interpreter(args.baseline_python, "--baseline-python")]
    else:
        first = pythons.for_constraints(constraints)
    base = envs.build_first(spec(envs.requirements_with(constraints, {}), "baseline"), first, args.envs)
    then = [interpreter(args.python, "--python")] if args.python else pythons.search_order(base.spec.python)
    cand_spec = spec(envs.requirements_with(constraints, changes), f"candidate ({change})")
    return base, envs.build_first(cand_spec, then, args.envs)


def _side(store: Path, drop: set[str]) -> records.Records:
    """The store's records, the runs in `drop` left out (a check that did not run on a side: step_rows)."""
    everything = records.load([store]) if (store / "records").is_dir() else records.Records()
    kept = everything.subset(everything.run_ids - drop)
    kept.roots, kept.problems = [store], list(everything.problems)
    return kept


def _judge(
    stores: dict[str, Path], th: Thresholds, drop: set[str]
) -> tuple[gate.GateResult, tuple[records.Records, records.Records]] | tuple[None, None]:
    """The gate's result over both stores and the records it compared, drift replay files written
    first; (None, None) when neither side recorded anything."""
    if not any((s / "records").is_dir() for s in stores.values()):
        return None, None
    base, cand = _side(stores["baseline"], drop), _side(stores["candidate"], drop)
    pairs = drift.pair(base.cases, cand.cases)
    drift.write_replays(
        pairs, cand.cases, cand.runs, stores["candidate"], factor=th.drift_factor, min_used=th.drift_min_used
    )
    result = gate.compare(base, cand, th, labels=(str(stores["baseline"]), str(stores["candidate"])))
    return result, (base, cand)


def _budget(args: argparse.Namespace) -> upgrade.Budget:
    return upgrade.Budget(
        kernels=tuple(args.kernel),
        examples=args.examples,
        seed=args.seed,
        compile=not args.no_compile,
        compile_shapes=tuple(args.compile_shape),
        bench=not args.no_bench,
        bench_shapes=tuple(args.bench_shape),
        bench_rounds=args.bench_rounds,
        case_timeout=args.case_timeout,
    )


def _change(base_versions: dict, cand_versions: dict, changes: dict[str, str]) -> str:
    moved = [f"{k} {base_versions.get(k)} -> {cand_versions.get(k)}" for k in base_versions]
    moved = [m for k, m in zip(base_versions, moved, strict=True) if base_versions.get(k) != cand_versions.get(k)]
    if moved:
        return ", ".join(moved)
    pins = " ".join(f"{k}=={v}" for k, v in changes.items())
    return f"{pins} (no version changed: the control)"


def _kernels(budget: upgrade.Budget, base: list[str], cand: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The kernels each side runs (those registered there), and every kernel asked for."""
    either = base + [k for k in cand if k not in base]
    unknown = [k for k in budget.kernels if k not in either]
    if unknown:
        raise UsageError(f"--kernel {unknown[0]} is registered on neither side; registered: {', '.join(either)}")
    wanted = list(budget.kernels) or either
    # A kernel registered in the baseline only is lost (registration_rows): no need to run it there.
    return [k for k in wanted if k in base and k in cand], [k for k in wanted if k in cand], wanted


def main(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    th = load(args.thresholds)
    changes = upgrade.targets(args.to, read_constraints(args.constraints))
    budget = _budget(args)
    jobs = shards.default_jobs() if args.jobs is None else args.jobs
    if jobs < 1:
        raise UsageError(f"--jobs={jobs} must be at least 1")
    junitxml, summary = args.junitxml, args.json
    results.check_writable(junitxml, "--junitxml")
    results.check_writable(summary, "--json")
    base_env, cand_env = _environments(args, changes)
    declared = [_with_forks(upgrade.query(env, upgrade.KERNELS, cwd=ROOT), budget) for env in (base_env, cand_env)]
    base_kernels, cand_kernels = list(declared[0]), list(declared[1])
    # Both sides run the same cases: the baseline's declaration first (the same checkout declares both).
    budget = dataclasses.replace(budget, declared=tuple({**declared[1], **declared[0]}.items()))
    versions = [upgrade.query(env, upgrade.VERSIONS, cwd=ROOT) for env in (base_env, cand_env)]
    change = _change(*versions, changes)
    base_run, cand_run, wanted = _kernels(budget, base_kernels, cand_kernels)
    print(f"upgrade: {change}")
    for k in wanted:
        print(f"  kernel {k}: registered on {_where(k, base_run, cand_run)}, {budget.examples_for(k)} cases")
    out = args.out.resolve()
    stores = {"baseline": out / "baseline", "candidate": out / "candidate"}
    for store in stores.values():
        if (store / "records").exists():
            raise UsageError(f"{store} already holds records; give another --out or remove it")
    plans = {"baseline": upgrade.steps(budget, base_run, stores["baseline"])}
    plans["candidate"] = upgrade.steps(budget, cand_run, stores["candidate"])
    sides = {"baseline": (base_env, stores["baseline"]), "candidate": (cand_env, stores["candidate"])}
    total = sum(len(p) for p in plans.values())
    with progress.Steps(total, "upgrade") as bar:
        done = upgrade.run_all(sides, plans, cwd=ROOT, logs=out / "logs", jobs=jobs, log=bar.done)
    rows, drop = verdict.step_rows(done)
    rows += verdict.registration_rows(base_kernels, cand_kernels, wanted)
    result, recs = _judge(stores, th, drop)
    if result is None:  # neither side recorded anything: only the step rows say why
        labels = {"baseline": str(stores["baseline"]), "candidate": str(stores["candidate"])}
        result = gate.GateResult(**labels, thresholds=th.source, rows=[])
    result.rows = rows + result.rows
    v = verdict.verdict(change=change, result=result)
    print("\n".join(v.lines()))
    print(gate.format_table(result))
    # A fork (--kernel K=MOD:ATTR): the fixes the candidate's jax brings that the fork lacks (docs/forks.md).
    for line in candidate.report(wanted, versions[1].get("jax")):
        print(line)
    if recs is not None:
        report_path = compose.write(_report(v, result, recs, th), out / "index.html")
        print(f"report -> {report_path}")
    out.mkdir(parents=True, exist_ok=True)
    junitxml, summary = junitxml or out / JUNIT_NAME, summary or out / SUMMARY_NAME
    kernels = {k: _where(k, base_run, cand_run) for k in wanted}
    sides = {"baseline": versions[0], "candidate": versions[1]}
    results.write_gate(v, result, kernels=kernels, junitxml=junitxml, json_path=summary, versions=sides)
    print(f"results for CI -> {junitxml}, {summary}")
    print(f"upgrade took {time.perf_counter() - start:.0f} s")
    return v.code


def _with_forks(declared: Any, budget: upgrade.Budget) -> dict[str, int]:
    """A side's kernels with their cases (`declared`), and each fork asked for (--kernel K=MOD:ATTR) whose kernel
    the side registers, with that kernel's cases: a fork runs where the kernel it replaces does."""
    forks = {k: declared[up] for k in budget.kernels if k not in declared and (up := upstream_of(k)) in declared}
    return {**declared, **forks}


def _where(kernel: str, base_run: list[str], cand_run: list[str]) -> str:
    """Where a kernel asked for is registered (and so runs)."""
    return "both sides" if kernel in base_run else "the candidate only" if kernel in cand_run else "the baseline only"


def _report(v: verdict.Verdict, result: gate.GateResult, recs: tuple[Any, Any], th: Thresholds) -> Any:
    """The report of both sides, with the upgrade's verdict as its headline and groups (the same as printed)."""
    report = compose.of_sides(*recs, result, thresholds=th, title=v.headline)
    status = "pass" if v.safe else "regression" if v.reasons else "fail"
    report.verdict = data.Verdict(
        status=status,
        headline=v.headline,
        details=[],
        baseline=result.baseline,
        groups=[(str(g), list(lines)) for g, lines in v.groups.items()],
    )
    return report
