"""`pin FILE`: add a failure file to the regression corpus that the default test run replays.

A pinned case is replayed against the kernel its file names: the recorded one, or the one
given with --kernel (a case found with a planted or forked kernel, pinned against the
upstream kernel). The test suite asserts that every pinned case passes, so only a case
that passes now can be pinned: a fixed bug stays fixed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK
from harness.running.failures import failure_id, load_failure, replay
from harness.store import bug_views
from harness.store.files import atomic_write_json

NAME = "pin"
HELP = "add a failure file to the regression corpus (tests/regressions/) replayed by the test suite"
DEFAULT_CORPUS = "tests/regressions"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a failure file written by `run`")
    p.add_argument("--kernel", metavar="K", help="pin against this kernel instead of the recorded one")
    p.add_argument("--corpus", type=Path, default=Path(DEFAULT_CORPUS), metavar="DIR", help=f"default {DEFAULT_CORPUS}")
    p.add_argument("--no-check", action="store_true", help="pin without replaying it first")


def main(args: argparse.Namespace) -> int:
    ff = load_failure(args.file)
    found_with = ff.record.kernel
    if args.kernel:
        ff.retarget(args.kernel)
    kernel = ff.record.kernel
    if not args.no_check:
        result = replay(ff)
        if not result.passed:
            for s in result.subjects:
                print(bug_views.error_table(s, ff.case.dtype))
            print(
                f"not pinned: the case still fails against {kernel}; the corpus holds fixed bugs only "
                "(fix it first, or pin it against another kernel with --kernel)"
            )
            return EXIT_FAIL
    pinned = {"time": dt.datetime.now(dt.UTC).isoformat(), "source": str(args.file), "found_with": found_with}
    record = dataclasses.replace(ff.record, id=failure_id(ff.case, kernel), pinned=pinned)
    path = args.corpus / f"{record.id}.json"
    atomic_write_json(path, record.to_json())
    print(f"pinned {ff.case} against {kernel} -> {path}")
    return EXIT_OK
