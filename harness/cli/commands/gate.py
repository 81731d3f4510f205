"""`gate`: judge a candidate environment's records against a baseline's; exit 1 on any regression."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import gate
from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.cli.commands.report import SPEC_HELP, add_store_arguments, load_inputs
from harness.report import compose

NAME = "gate"
HELP = "compare a candidate's records with a baseline's: exit 1 on a new failure or a regression beyond noise"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", required=True, metavar="SPEC", help=f"the baseline: {SPEC_HELP}")
    p.add_argument("--candidate", required=True, metavar="SPEC", help="the candidate, named the same way")
    add_store_arguments(p)
    p.add_argument("--report", type=Path, metavar="FILE", help="also write the HTML report with this comparison")
    p.add_argument("--verbose", "-v", action="store_true", help="list unchanged rows too")


def main(args: argparse.Namespace) -> int:
    pool, th = load_inputs(args)
    if args.report is not None:
        report, result = compose.make(pool, thresholds=th, baseline=args.baseline, candidate=args.candidate)
    else:
        base, base_label, cand, cand_label = compose.sides(pool, args.baseline, args.candidate)
        result = gate.compare(base, cand, th, labels=(base_label, cand_label))
    if not result.rows:
        raise UsageError(f"{result.summary()} (baseline {result.baseline}, candidate {result.candidate})")
    print(gate.format_table(result, verbose=args.verbose))
    if args.report is not None:
        print(f"report -> {compose.write(report, args.report)}")
    return EXIT_FAIL if result.failed else EXIT_OK
