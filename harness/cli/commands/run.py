"""`run`: draw cases with Hypothesis and check kernels against the oracles."""

from __future__ import annotations

import argparse
import contextlib
import os

from harness.cli import console, results
from harness.cli.commands._shared import add_kernel, add_out, interrupt_signals
from harness.running import session
from harness.running.jobs import processes, stream
from harness.running.plan import RunPlan, options_of, plan_from_options
from harness.running.sink import StopToken

NAME = "run"
HELP = "draw attention cases and check each kernel against the oracles and a float64 truth"
RULER = session.RULER  # the same-dtype JAX oracle every subject is measured by, not a subject


def add_arguments(p: argparse.ArgumentParser, plan: type[RunPlan] = RunPlan) -> None:
    """Every option of `plan` (harness.running.plan.RunPlan), as its fields declare them: defined once."""
    groups = {
        "search": p,
        "process": p,
        "interpreter": p.add_argument_group("interpreter checks (Pallas TPU interpreter only)"),
    }
    # Grouped as --help lists them: what is searched, how the processes run, the interpreter's checks.
    for _, opt in sorted(options_of(plan), key=lambda fo: list(groups).index(fo[1].group)):
        if opt.shared:  # defined once for every command that takes it
            {"--kernel": add_kernel, "--out": add_out}[opt.flag](p)
            continue
        flags = ("-v", opt.flag) if opt.flag == "--verbose" else (opt.flag,)
        kw: dict[str, object] = {"help": opt.help}
        if opt.type is None and not opt.repeat:
            kw["action"] = "store_true"
        else:
            kw |= {"action": "append"} if opt.repeat else {"type": opt.type}
            kw |= {"metavar": opt.metavar} if opt.metavar else {}
            kw |= {"choices": opt.choices} if opt.choices else {}
        groups[opt.group].add_argument(*flags, **kw)
    # Not the plan's: what is written of its outcome (a --jobs run's parent writes them, never its workers).
    results.add_arguments(p.add_argument_group("results for CI"))


def main(args: argparse.Namespace) -> int:
    """The options as a plan, the plan run (harness.running.session), and its outcome printed."""
    plan = plan_from_options(vars(args))
    results.check_writable(args.junitxml, "--junitxml")
    results.check_writable(args.json, "--json")
    stop = StopToken()
    # A --jobs run's parent forwards a stop to its workers itself (harness.running.jobs.processes.run_workers).
    with interrupt_signals(stop) if plan.jobs == 1 else contextlib.nullcontext():
        outcome = session.run_session(plan, console.TerminalSink(plan.out, verbose=plan.verbose), stop)
    if plan.shard is not None and os.environ.get(processes.PARENT_ENV):
        # A worker of `run --jobs`: its summary stays in its log, the parent prints the merged one.
        print(stream.summary_header(plan.shard))
    print(console.outcome_text(outcome))
    results.write(outcome, junitxml=args.junitxml, json_path=args.json)
    return outcome.code
