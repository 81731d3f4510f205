"""`report`: render the results records as one self-contained HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.cli.commands._shared import add_out, add_store, stores
from harness.gate.thresholds import load
from harness.report import compose
from harness.store import read as records

NAME = "report"
HELP = "render the results records as one static HTML report (optionally against a baseline, with the gate)"
DEFAULT_OUT = Path("reports/index.html")
SPEC_HELP = "a store or run directory, a run id in the --store stores, or KEY=VALUE[,...] such as jax=0.10.2"


def add_store_arguments(p: argparse.ArgumentParser) -> None:
    """Options the report and gate commands share."""
    add_store(p)
    p.add_argument("--thresholds", type=Path, metavar="FILE", help="gate thresholds TOML (default: the built-in file)")
    p.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="FIELD:N",
        help='override one compiled-figure limit, e.g. "temp_bytes:5%%" (repeatable)',
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_store_arguments(p)
    p.add_argument("--baseline", metavar="SPEC", help=f"compare with this baseline and show the gate: {SPEC_HELP}")
    p.add_argument(
        "--candidate", metavar="SPEC", help="the candidate side (default: every run in the stores not in the baseline)"
    )
    add_out(p, default=DEFAULT_OUT, what="the HTML report to write")
    p.add_argument("--title", default="Attention kernel report", help="the report's title")


def load_inputs(args: argparse.Namespace):  # -> (records.Records, thresholds.Thresholds)
    """The stores' records and the thresholds, every problem an InputError (exit 2, one line)."""
    read_from = stores(args)
    th = load(args.thresholds, limits=args.limit)
    specs = [s for s in (getattr(args, "baseline", None), getattr(args, "candidate", None)) if s is not None]
    if args.store is None and len(specs) == 2 and all(Path(s).is_dir() for s in specs):
        return records.Records(), th  # both sides name their own directories: no store to select from
    return records.load(read_from), th


def main(args: argparse.Namespace) -> int:
    if args.out.is_dir():
        raise UsageError(
            f"--out={str(args.out)!r} is a directory; give the HTML file to write, e.g. {args.out / 'index.html'}"
        )
    pool, th = load_inputs(args)
    report, gate = compose.make(pool, thresholds=th, baseline=args.baseline, candidate=args.candidate, title=args.title)
    if not len(pool) and gate is None:
        raise UsageError(f"no records in {', '.join(map(str, stores(args)))}")
    out = compose.write(report, args.out)
    print(f"{report.verdict.headline}")
    print(f"report -> {out}")
    if pool.problems:
        n = len(pool.problems)
        raise UsageError(
            f"{n} record{'s' if n != 1 else ''} could not be read (listed in the report): {pool.problems[0]}"
        )
    return EXIT_OK if report.verdict.status == "pass" else EXIT_FAIL
