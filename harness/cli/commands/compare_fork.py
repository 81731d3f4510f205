"""`compare-fork KERNEL=MODULE:ATTR`: does my fork do worse than the kernel it replaces?

The fork and its upstream built-in run the same derandomized cases (a drop-in draws its upstream's),
the same TPU compile checks and the same benchmarks, in this environment, each into a store of its
own (OUT/upstream, OUT/fork), the timed steps alternating between them; then the gate pairs the
fork's records with upstream's in every row family (harness.gate.forks) and writes one verdict and
one report. Exit 0 no worse, 1 worse somewhere (each row names both), 4 nothing compared.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from harness import gate
from harness.cli import UsageError, progress, results
from harness.cli.commands._shared import add_out
from harness.cli.commands.upgrade import JUNIT_NAME, SUMMARY_NAME, _report, _side
from harness.core import contract
from harness.environments import envs, upgrade
from harness.gate import drift, forks, verdict
from harness.gate.thresholds import Thresholds, load
from harness.report import compose
from harness.running.jobs import processes

NAME = "compare-fork"
HELP = "run a fork (KERNEL=MODULE:ATTR) and the built-in it replaces on the same cases, compiles and benchmarks; gate"
ROOT = Path(__file__).resolve().parents[3]
DEFAULT_OUT = Path("reports/fork")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("fork", metavar="KERNEL=MODULE:ATTR", help="the fork, as `run --kernel` names it")
    b = p.add_argument_group("budget (the same on both)")
    b.add_argument("--examples", type=int, metavar="N", help="cases (default: the upstream's matrix budget + 2)")
    b.add_argument("--seed", type=int, default=0, metavar="S", help="Hypothesis seed (default 0)")
    b.add_argument("--no-compile", action="store_true", help="skip the TPU compile checks")
    b.add_argument("--compile-shape", action="append", default=[], metavar="S", help="compile only these shapes")
    b.add_argument(
        "--compile-topology", action="append", default=[], metavar="T", help="compile only for these TPU topologies"
    )
    b.add_argument(
        "--compile-rounds",
        type=int,
        default=upgrade.COMPILE_ROUNDS,
        metavar="N",
        help=f"compile processes each, alternating (default {upgrade.COMPILE_ROUNDS}: the compile-time rule's "
        "samples; 1 judges memory, code generation and the outline alone)",
    )
    b.add_argument("--no-bench", action="store_true", help="skip the benchmarks")
    b.add_argument("--bench-shape", action="append", default=[], metavar="S", help="benchmark only these shapes")
    b.add_argument("--bench-rounds", type=int, default=upgrade.BENCH_ROUNDS, metavar="N", help="bench processes each")
    p.add_argument("--jobs", type=int, metavar="N", help="run steps at once (default: the cores)")
    add_out(p, default=DEFAULT_OUT, what="stores, logs and report")
    results.add_arguments(
        p.add_argument_group("results for CI"), what="gate", defaults=(f"OUT/{JUNIT_NAME}", f"OUT/{SUMMARY_NAME}")
    )
    p.add_argument("--thresholds", type=Path, metavar="FILE", help="gate thresholds TOML (default: the built-in file)")


def _steps(
    kernel: str, budget: upgrade.Budget, examples: int, store: Path, topologies: list[str], rounds: int
) -> list[upgrade.Step]:
    """The commands one side runs: the run, the compile rounds and the bench rounds, each of `kernel` alone."""
    run = ["run", "--profile", "ci", "--seed", str(budget.seed), "--examples", str(examples), "--no-database"]
    out = [upgrade.Step(name="run", argv=(*run, "--jobs", "1", "--out", str(store), "--kernel", kernel), kernel=kernel)]
    if budget.compile:
        argv = ["compile", "--out", str(store), "--repeat", "1", "--kernel", kernel]
        argv += [a for s in budget.compile_shapes for a in ("--shape", s)]
        argv += [a for t in topologies for a in ("--topology", t)]
        out += [upgrade.Step(name="compile", argv=tuple(argv), round=i) for i in range(rounds)]
    if budget.bench:
        argv = ["bench", "--out", str(store), "--kernel", kernel]
        argv += [a for s in budget.bench_shapes for a in ("--shape", s)]
        out += [upgrade.Step(name="bench", argv=tuple(argv), round=i) for i in range(budget.bench_rounds)]
    return out


def main(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    fork = contract.resolve(args.fork)
    upstream = forks.upstream_of(args.fork)
    if upstream is None or fork.drops_into != upstream:
        raise UsageError(f"{args.fork!r} is not a drop-in: give KERNEL=MODULE:ATTR, e.g. pallas_flash=mymod:flash")
    budget = upgrade.Budget(
        seed=args.seed,
        compile=not args.no_compile,
        compile_shapes=tuple(args.compile_shape),
        bench=not args.no_bench,
        bench_shapes=tuple(args.bench_shape),
        bench_rounds=args.bench_rounds,
    )
    examples = args.examples or upgrade.default_examples(upstream)
    if examples < 1 or args.compile_rounds < 1:
        raise UsageError(f"--examples={examples} and --compile-rounds={args.compile_rounds} must be at least 1")
    jobs = processes.default_jobs() if args.jobs is None else args.jobs
    junitxml, summary = args.junitxml, args.json
    results.check_writable(junitxml, "--junitxml")
    results.check_writable(summary, "--json")
    out = args.out.resolve()
    # The gate's sides: upstream is the baseline, the fork the candidate; each its own store.
    stores = {"baseline": out / "upstream", "candidate": out / "fork"}
    for store in stores.values():
        if (store / "records").exists():
            raise UsageError(f"{store} already holds records; give another --out or remove it")
    # Both in this environment: this interpreter, as a built environment.
    spec = envs.EnvSpec(python=sys.executable, requirements=(), index=envs.IndexOptions(), label="this")
    here = envs.Env(Path(sys.executable).parent.parent, spec)
    plans = {
        side: _steps(kernel, budget, examples, stores[side], args.compile_topology, args.compile_rounds)
        for side, kernel in (("baseline", upstream), ("candidate", args.fork))
    }
    print(f"compare-fork: {args.fork} against {upstream}, {examples} cases each")
    with progress.Steps(sum(len(p) for p in plans.values()), "compare-fork") as bar:
        sides = {side: (here, store) for side, store in stores.items()}
        done = upgrade.run_all(sides, plans, cwd=ROOT, logs=out / "logs", jobs=jobs, log=bar.done)
    rows, drop = verdict.step_rows(done)
    th = load(args.thresholds)
    result, recs = _judge(stores, th, drop)
    if result is None:  # neither side recorded anything: only the step rows say why
        labels = {side: str(store) for side, store in stores.items()}
        result = gate.GateResult(**labels, thresholds=th.source, rows=[])
    result.rows = rows + result.rows
    v = verdict.verdict(change=f"{args.fork} against {upstream}", result=result)
    print("\n".join(v.lines()))
    print(gate.format_table(result))
    if recs is not None:
        print(f"report -> {compose.write(_report(v, result, recs, th), out / 'index.html')}")
    out.mkdir(parents=True, exist_ok=True)
    junitxml, summary = junitxml or out / JUNIT_NAME, summary or out / SUMMARY_NAME
    results.write_gate(v, result, kernels={args.fork: upstream}, junitxml=junitxml, json_path=summary)
    print(f"results for CI -> {junitxml}, {summary}")
    print(f"compare-fork took {time.perf_counter() - start:.0f} s")
    return v.code


def _judge(stores: dict[str, Path], th: Thresholds, drop: set[str]) -> tuple[Any, Any]:
    """The gate over both stores (the fork's records read as upstream's: harness.gate.forks), drift replay
    files written first; (None, None) when neither side recorded anything."""
    if not any((s / "records").is_dir() for s in stores.values()):
        return None, None
    base, cand = _side(stores["baseline"], drop), _side(stores["candidate"], drop)
    paired = forks.as_upstream(cand, forks.pairs(base, cand))
    pairs = drift.pair(base.cases, paired.cases)
    drift.write_replays(
        pairs, paired.cases, paired.runs, stores["candidate"], factor=th.drift_factor, min_used=th.drift_min_used
    )
    result = gate.compare(base, cand, th, labels=(str(stores["baseline"]), str(stores["candidate"])))
    return result, (base, cand)
