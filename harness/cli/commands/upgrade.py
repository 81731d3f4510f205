"""`upgrade --to NAME==VERSION ...`: should we take this release?

Exit 0 safe, 1 not safe, 2 bad usage, 4 nothing could be compared here (every check not compared).
The same as three jobs: `--side baseline` and `--side candidate` (each exits 0 once its directory, OUT/SIDE,
is written), then `--gate BASE_DIR CAND_DIR`; without either option both sides run here, then the same gate.
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
from harness.running.jobs import processes
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
        metavar="NAME==VERSION",
        help="a package of constraints/default.txt at another release (repeatable), e.g. jax==0.9.2; "
        "required except with --gate",
    )
    _add_side_arguments(p)
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
        f"(default: ${processes.JOBS_ENV} or the number of cores)",
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


def _add_side_arguments(p: argparse.ArgumentParser) -> None:
    """--side and --gate: an upgrade as three jobs (docs/upgrade.md, .github/workflows/upgrade-gate.yml)."""
    m = p.add_argument_group("one side at a time (the sides as parallel CI jobs)").add_mutually_exclusive_group()
    m.add_argument(
        "--side",
        choices=upgrade.SIDES,
        help=f"build and run this side only, into OUT/SIDE (its store, logs and {upgrade.SIDE_FILE}); "
        "gate both later with --gate",
    )
    m.add_argument(
        "--gate",
        nargs=2,
        type=Path,
        metavar=("BASE_DIR", "CAND_DIR"),
        help="gate two side directories written by --side (OUT/baseline, OUT/candidate): the verdict, report "
        "and results into --out",
    )


def _build(args: argparse.Namespace, changes: dict[str, str], side: str, *, after: str | None = None) -> envs.Env:
    """One side's environment. The candidate tries `after` (the baseline's Python) first where given, so that a
    release that needs no other Python is gated with nothing else changed; alone, its constraints' Pythons."""
    constraints = read_constraints(args.constraints)
    change = " ".join(f"{k}=={v}" for k, v in changes.items())
    pins, label = (changes, f"candidate ({change})") if side == "candidate" else ({}, "baseline")
    chosen, flag = (args.python, "--python") if side == "candidate" else (args.baseline_python, "--baseline-python")
    if chosen:
        first = [interpreter(chosen, flag)]
    else:
        first = pythons.search_order(after) if after else pythons.for_constraints(constraints)
    spec = envs.EnvSpec(
        python=sys.executable,
        requirements=envs.requirements_with(constraints, pins),
        index=index_options(args),
        editable=(str(ROOT),),
        label=label,
    )
    return envs.build_first(spec, first, args.envs)


def _environments(args: argparse.Namespace, changes: dict[str, str]) -> tuple[envs.Env, envs.Env]:
    """Both sides' environments, the candidate on the baseline's Python first."""
    base = _build(args, changes, "baseline")
    return base, _build(args, changes, "candidate", after=base.spec.python)


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
    labels = (str(stores["baseline"]), str(stores["candidate"]))
    # Sides run as separate jobs may run on different machines: their timings are then not compared.
    result = gate.compare(base, cand, th, labels=labels, one_machine=True)
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
    results.check_writable(args.junitxml, "--junitxml")
    results.check_writable(args.json, "--json")
    out = args.out.resolve()
    if args.gate:
        if args.to:
            raise UsageError("--gate reads the --to pins from the side directories: leave --to out")
        sides = _read_sides(*(d.resolve() for d in args.gate))
        _announce(sides)
        code = _decide(sides, out, th, args)
    else:
        if not args.to:
            raise UsageError("give at least one --to NAME==VERSION, e.g. --to jax==0.9.2 (or --gate BASE_DIR CAND_DIR)")
        changes = upgrade.targets(args.to, read_constraints(args.constraints))
        jobs = processes.default_jobs() if args.jobs is None else args.jobs
        if jobs < 1:
            raise UsageError(f"--jobs={jobs} must be at least 1")
        if args.side:
            code = _one_side(args, changes, out, jobs)
        else:
            # Both sides in this process are the same steps as two --side jobs, then the same gate as --gate.
            dirs = _run_sides(args, changes, out, jobs)
            code = _decide(_read_sides(dirs["baseline"], dirs["candidate"]), out, th, args)
    print(f"upgrade took {time.perf_counter() - start:.0f} s")
    return code


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Prepared:
    """A side ready to run: its environment, its kernels (with their declared cases) and its versions."""

    side: str
    env: envs.Env
    kernels: dict[str, int]
    versions: dict[str, Any]


def _prepare(side: str, env: envs.Env, budget: upgrade.Budget) -> _Prepared:
    kernels = _with_forks(upgrade.query(env, upgrade.KERNELS, cwd=ROOT), budget)
    return _Prepared(side=side, env=env, kernels=kernels, versions=upgrade.query(env, upgrade.VERSIONS, cwd=ROOT))


def _one_side(args: argparse.Namespace, changes: dict[str, str], out: Path, jobs: int) -> int:
    """`--side S`: that side's environment and steps, written to OUT/S for `--gate`. Exit 0 once written: a step
    that did not run is recorded there, and judged by the gate."""
    budget = _budget(args)
    side = _prepare(args.side, _build(args, changes, args.side), budget)
    budget = dataclasses.replace(budget, declared=tuple(side.kernels.items()))
    unknown = [k for k in budget.kernels if k not in side.kernels]
    mine = [k for k in (budget.kernels or side.kernels) if k in side.kernels]
    print(f"upgrade --side {args.side}: " + ", ".join(f"{k} {v}" for k, v in side.versions.items()))
    for k in mine:
        print(f"  kernel {k}: {budget.examples_for(k)} cases")
    for k in unknown:
        print(f"  kernel {k}: not registered here (the gate says whether the other side has it)")
    directory = _run({args.side: side}, {args.side: mine}, budget, changes, out, jobs)[args.side]
    print(f"{args.side} -> {directory}; gate it with the other side: python -m harness upgrade --gate BASE CAND")
    return 0


def _run_sides(args: argparse.Namespace, changes: dict[str, str], out: Path, jobs: int) -> dict[str, Path]:
    """Both sides in this process: each side's steps as `--side` runs them, the timed rounds alternating."""
    budget = _budget(args)
    prepared = {s: _prepare(s, env, budget) for s, env in zip(upgrade.SIDES, _environments(args, changes), strict=True)}
    base, cand = prepared["baseline"], prepared["candidate"]
    # Both sides run the same cases: the baseline's declaration first (the same checkout declares both).
    budget = dataclasses.replace(budget, declared=tuple({**cand.kernels, **base.kernels}.items()))
    base_run, cand_run, wanted = _kernels(budget, list(base.kernels), list(cand.kernels))
    _print_plan(_change(base.versions, cand.versions, changes), budget, wanted, base_run, cand_run)
    return _run(prepared, {"baseline": base_run, "candidate": cand_run}, budget, changes, out, jobs)


def _run(
    prepared: dict[str, _Prepared],
    kernels: dict[str, list[str]],
    budget: upgrade.Budget,
    changes: dict[str, str],
    out: Path,
    jobs: int,
) -> dict[str, Path]:
    """Run the sides' steps, each into OUT/<side> with its side file; each side's directory."""
    dirs = {s: out / s for s in prepared}
    for d in dirs.values():
        if (d / "records").exists() or (d / upgrade.SIDE_FILE).exists():
            raise UsageError(f"{d} already holds an upgrade side; give another --out or remove it")
    plans = {s: upgrade.steps(budget, kernels[s], dirs[s]) for s in prepared}
    sides = {s: (p.env, dirs[s]) for s, p in prepared.items()}
    with progress.Steps(sum(len(p) for p in plans.values()), "upgrade") as bar:
        done = upgrade.run_all(sides, plans, cwd=ROOT, jobs=jobs, log=bar.done)
    for s, p in prepared.items():
        upgrade.SideRecord(
            side=s,
            to=changes,
            budget=budget.to_json(),
            kernels=p.kernels,
            versions=p.versions,
            steps=tuple(r for r in done if r.side == s),
        ).write(dirs[s])
    return dirs


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Sides:
    """Both sides' files, as the gate reads them."""

    base: upgrade.SideRecord
    cand: upgrade.SideRecord
    dirs: dict[str, Path]
    budget: upgrade.Budget


def _read_sides(base_dir: Path, cand_dir: Path) -> _Sides:
    base, cand = upgrade.SideRecord.read(base_dir), upgrade.SideRecord.read(cand_dir)
    for got, want, d in ((base, "baseline", base_dir), (cand, "candidate", cand_dir)):
        if got.side != want:
            raise UsageError(f"{d} is the {got.side} side; give the baseline's directory first, then the candidate's")
    for what in ("to", "budget"):
        b, c = getattr(base, what), getattr(cand, what)
        if b != c:
            raise UsageError(f"the sides ran with different {what} ({b} against {c}): run both with the same options")
    budget = upgrade.Budget.from_json(base.budget, declared={**cand.kernels, **base.kernels})
    return _Sides(base=base, cand=cand, dirs={"baseline": base_dir, "candidate": cand_dir}, budget=budget)


def _announce(sides: _Sides) -> None:
    base_run, cand_run, wanted = _kernels(sides.budget, list(sides.base.kernels), list(sides.cand.kernels))
    change = _change(sides.base.versions, sides.cand.versions, sides.base.to)
    _print_plan(change, sides.budget, wanted, base_run, cand_run)


def _print_plan(
    change: str, budget: upgrade.Budget, wanted: list[str], base_run: list[str], cand_run: list[str]
) -> None:
    print(f"upgrade: {change}")
    for k in wanted:
        print(f"  kernel {k}: registered on {_where(k, base_run, cand_run)}, {budget.examples_for(k)} cases")


def _steps(sides: _Sides) -> list[upgrade.StepResult]:
    """Both sides' step results, less the baseline's runs of a kernel the candidate does not register (lost:
    registration_rows says so once), as the one-process upgrade never runs them."""
    cand = sides.cand.kernels
    base = [r for r in sides.base.steps if r.step.kernel is None or r.step.kernel in cand]
    return base + list(sides.cand.steps)


def _decide(sides: _Sides, out: Path, th: Thresholds, args: argparse.Namespace) -> int:
    """The gate over both side directories: verdict, table, report and results for CI; the verdict's exit code."""
    base_run, cand_run, wanted = _kernels(sides.budget, list(sides.base.kernels), list(sides.cand.kernels))
    change = _change(sides.base.versions, sides.cand.versions, sides.base.to)
    lost = {run for r in sides.base.steps if r.step.kernel not in (None, *sides.cand.kernels) for run in r.runs}
    rows, drop = verdict.step_rows(_steps(sides))
    rows += verdict.registration_rows(list(sides.base.kernels), list(sides.cand.kernels), wanted)
    result, recs = _judge(sides.dirs, th, drop | lost)
    if result is None:  # neither side recorded anything: only the step rows say why
        result = gate.GateResult(**{s: str(d) for s, d in sides.dirs.items()}, thresholds=th.source, rows=[])
    result.rows = rows + result.rows
    v = verdict.verdict(change=change, result=result)
    print("\n".join(v.lines()))
    print(gate.format_table(result))
    # A fork (--kernel K=MOD:ATTR): the fixes the candidate's jax brings that the fork lacks (docs/forks.md).
    for line in candidate.report(wanted, sides.cand.versions.get("jax")):
        print(line)
    if recs is not None:
        report_path = compose.write(_report(v, result, recs, th), out / "index.html")
        print(f"report -> {report_path}")
    out.mkdir(parents=True, exist_ok=True)
    junitxml, summary = args.junitxml or out / JUNIT_NAME, args.json or out / SUMMARY_NAME
    kernels = {k: _where(k, base_run, cand_run) for k in wanted}
    versions = {"baseline": sides.base.versions, "candidate": sides.cand.versions}
    results.write_gate(v, result, kernels=kernels, junitxml=junitxml, json_path=summary, versions=versions)
    print(f"results for CI -> {junitxml}, {summary}")
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
