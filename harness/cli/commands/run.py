"""`run`: draw cases with Hypothesis and check kernels against the oracles."""

from __future__ import annotations

import argparse
import contextlib

from harness.cli import console, results
from harness.cli.commands._shared import add_kernel, add_out, interrupt_signals
from harness.core import compat, profiles
from harness.running import runner, session, shards, worker
from harness.running.runner import CaseResult

NAME = "run"
HELP = "draw attention cases and check each kernel against the oracles and a float64 truth"
RULER = session.RULER  # the same-dtype JAX oracle every subject is measured by, not a subject


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every option of harness.running.session.RunPlan (tests/test_session.py parses each back)."""
    _add_search_options(p)
    _add_process_options(p)
    _add_interpreter_options(p.add_argument_group("interpreter checks (Pallas TPU interpreter only)"))
    # Not the plan's: what is written of its outcome (a --jobs run's parent writes them, never its workers).
    results.add_arguments(p.add_argument_group("results for CI"))


def _add_search_options(p: argparse.ArgumentParser) -> None:
    add_kernel(p)
    p.add_argument(
        "--oracle", action="append", metavar="O", help="oracle to check beside the kernel (default: all but the ruler)"
    )
    p.add_argument("--examples", type=int, metavar="N", help="cases per kernel (default: the profile's)")
    p.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="Hypothesis seed (default: the profile's); a seeded run neither reads nor saves the example database",
    )
    p.add_argument(
        "--profile",
        metavar="P",
        help=f"Hypothesis profile: {', '.join(profiles.PROFILES)} (default: ${profiles.PROFILE_ENV} or dev)",
    )
    add_out(p)
    p.add_argument("--no-grads", action="store_true", help="forward pass only")
    p.add_argument("--no-database", action="store_true", help="do not replay or save examples in DIR/.hypothesis")
    p.add_argument(
        "--max-shrinks", type=int, metavar="N", help="cases run while shrinking each failure (default: the profile's)"
    )
    p.add_argument(
        "--first-failure",
        action="store_true",
        help="stop each kernel's search at its first failure (default: search on, and report every distinct "
        "failure, each shrunk, with its own failure file)",
    )
    p.add_argument(
        "--known",
        action="append",
        metavar="FINDING",
        help="a finding (a note's name in docs/findings/, see `harness findings`) whose failures are expected: "
        "reported by name, they do not fail the run; strict: if its own case passes now, the run fails",
    )
    p.add_argument(
        "--no-smoke",
        action="store_true",
        help="skip the smoke cases (each declared mask component, tiling class and dtype at the smallest size) "
        "that a run checks before drawing cases",
    )
    p.add_argument(
        "--no-pool",
        action="store_true",
        help="draw every case whole instead of mostly from the run's pool of compiled programs "
        '(README "Where a case\'s time goes"): every case compiles anew, several times slower',
    )


def _add_process_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--case-timeout",
        type=float,
        metavar="S",
        help="per-case time limit of each kernel call: kernels run in a worker process, killed on overrun "
        "(a hang, crash or exit fails that case, and the run goes on with a fresh worker); "
        f"default ${worker.TIME_LIMIT_ENV}, else {worker.DEFAULT_TIME_LIMIT_S:g}",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="print each case whole (block sizes and all) on its line"
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run the kernels in this process, with no time limit (for a debugger); "
        "a kernel that crashes or exits then ends the run",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help=f"worker processes, each checking one shard of the run into the same store; the summary merges "
        f"them (default ${shards.JOBS_ENV}, else the number of cores)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="check only shard I of N (0 <= I < N): the cases whose program's id is I modulo N, its share of "
        "--examples; "
        "shards of one run are disjoint and the same every time (for CI jobs on several machines)",
    )
    p.add_argument(
        "--cross-interpret",
        action="store_true",
        help="on a TPU host: also run each Pallas TPU kernel under the interpreter as a further subject "
        "('<kernel>@interpret'), judged against the same truth, so interpreter and chip are compared",
    )


def _add_interpreter_options(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--interpreter",
        choices=runner.INTERPRETER_POLICIES,
        help="which interpreter runs a Pallas TPU kernel off a TPU: fast (the default: the HLO interpreter for "
        "drawn cases; the faithful TPU interpret mode for smoke cases, a share of drawn cases, and the replay of "
        "every failure before it is reported), faithful (every case), or both (every case on each, compared); "
        "with --detect-races or --grid-order-seed the default is faithful",
    )
    g.add_argument("--detect-races", action="store_true", help="run the race detector; a race fails the case")
    g.add_argument(
        "--uninitialized-memory",
        choices=compat.UNINITIALIZED_MEMORY,
        default="nan",
        help="fill of buffers read before written (default nan: such a read shows as a non-finite output)",
    )
    g.add_argument(
        "--grid-order-seed",
        type=int,
        metavar="N",
        help="randomise 'parallel' grid order with seed N, rerun each kernel case with seed N+1, "
        "and fail a case whose two results differ at all",
    )


class _TerminalSink(session.StoreSink):
    """The store, with each finished case printed as one line (the whole case with --verbose)."""

    def __init__(self, plan: session.RunPlan) -> None:
        super().__init__(plan.out)
        self.verbose = plan.verbose

    def progress(self, index: int, total: int, result: CaseResult) -> None:
        print(console.progress_line(index, total, result, verbose=self.verbose), flush=True)


def main(args: argparse.Namespace) -> int:
    """The options as a plan, the plan run (harness.running.session), and its outcome printed."""
    plan = session.plan_from_options(vars(args))
    results.check_writable(args.junitxml, "--junitxml")
    results.check_writable(args.json, "--json")
    stop = session.StopToken()
    # A --jobs run's parent forwards a stop to its workers itself (harness.running.shards.run_workers).
    with interrupt_signals(stop) if plan.jobs == 1 else contextlib.nullcontext():
        outcome = session.run_session(plan, _TerminalSink(plan), stop)
    print(console.outcome_text(outcome))
    results.write(outcome, junitxml=args.junitxml, json_path=args.json)
    return outcome.code
