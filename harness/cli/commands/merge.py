"""`merge`: merge results stores from several machines (CI matrix jobs) into one."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK
from harness.store.files import merge_stores

NAME = "merge"
HELP = "copy the records and failure files of several results stores into one, without overwriting"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="+", type=Path, metavar="STORE", help="stores to merge from")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="store to merge into (created if missing)")


def main(args: argparse.Namespace) -> int:
    report = merge_stores(args.sources, args.out)
    print(f"merged into {args.out}: {report.copied} copied, {report.identical} already present")
    for path in report.kept_both:
        print(f"  {path}")
    for path in report.conflicts:
        print(f"  conflict: {path}")
    return EXIT_FAIL if report.conflicts else EXIT_OK
