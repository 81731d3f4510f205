"""`repro FILE`: replay a failure file and print its error table; exit 1 if it still fails."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK, EXIT_REFUSED, UsageError, console
from harness.core import strips, verdicts
from harness.core.case import Case
from harness.core.compare import TOLERANCE_VERSION
from harness.running.failures import CaseRefused, load_failure, replay, version_differences
from harness.runtime import isa
from harness.store import bug_views

NAME = "repro"
HELP = (
    "replay a failure file (DIR/failures/<id>.json): exit 1 if it still fails, 0 if it passes now, "
    "5 if the installed release refuses the case"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a failure file written by `run`")
    p.add_argument(
        "--kernel",
        metavar="K",
        help="replay against this kernel instead of the recorded one (e.g. pallas_flash for the upstream kernel)",
    )
    p.add_argument("--case-timeout", type=float, metavar="S", help="per-subject time limit (default: the recorded)")


# Replays of a file recorded as a flaky failure before `repro` says it passes now: it failed on some runs only.
FLAKY_REPLAYS = 3


def recorded_flaky(results: dict, kernel: str) -> str | None:
    """How the kernel's recorded failure was flaky (harness.core.verdicts.replay_line), or None where it was not."""
    entry = results.get(kernel)
    if not isinstance(entry, dict) or "replays" not in entry:
        return None
    try:
        replays = verdicts.replays_from_json(entry["replays"])
    except ValueError:
        return None
    interpreter, changed = entry.get("interpreter"), verdicts.changed(entry.get("comparisons"))
    if not verdicts.flaky(bool(entry.get("passed")), interpreter, replays, changed=changed):
        return None
    return verdicts.replay_line(interpreter, replays, changed=changed)


# Arrays of a case's size held at once while replaying it: q, k, v, dout, out and the
# gradients in the case dtype, their float64 truth and the same-dtype ruler (an overestimate
# is fine: it only decides whether a replay can fit in memory at all).
ARRAYS_HELD = 24


def _check_fits(path: Path, case: Case) -> None:
    """A case too large for this machine's memory is bad input (exit 2), not a MemoryError mid-replay."""
    elements = case.batch * case.q_heads * max(case.q_len, case.kv_len) * max(case.head_dim, case.kv_len)
    need = elements * 8 * ARRAYS_HELD
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if need > have:
        raise UsageError(
            f"{path}: case {case} needs about {need / 2**30:.3g} GiB to replay; this machine has "
            f"{have / 2**30:.3g} GiB: fix the case's sizes in the file"
        )


def main(args: argparse.Namespace) -> int:
    if args.case_timeout is not None and not (math.isfinite(args.case_timeout) and args.case_timeout > 0):
        raise UsageError(f"--case-timeout={args.case_timeout} must be a positive number of seconds")
    try:
        ff = load_failure(args.file)
        if args.kernel:
            ff.retarget(args.kernel)
    except CaseRefused as e:
        # The library's own error for this input, no wrong answer: `bisect` counts it as the fixed side.
        print(f"REFUSED: {e}")
        return EXIT_REFUSED
    _check_fits(ff.path, ff.case)
    print(console.replay_header(ff.path, ff.record, ff.case))
    changed = version_differences(ff.versions)
    if changed:
        print("installed versions differ from the recorded ones: " + ", ".join(changed))
    moved = isa.difference(ff.host)
    if moved:
        print(f"XLA's CPU ISA differs from the recorded one: {moved}; the rulers may round otherwise")
    if ff.tolerance_version is not None and ff.tolerance_version != TOLERANCE_VERSION:
        print(f"tolerance table changed: recorded version {ff.tolerance_version}, now {TOLERANCE_VERSION}")
    flaky = recorded_flaky(ff.record.results or {}, ff.record.kernel)
    result, tries = replay(ff, time_limit=args.case_timeout), 1
    while flaky and result.passed and tries < FLAKY_REPLAYS:
        result, tries = replay(ff, time_limit=args.case_timeout), tries + 1
    for s in result.subjects:
        print(bug_views.error_table(s, ff.case.dtype) + strips.appendix(s.located))
    if result.passed and flaky:
        print(
            f"PASSES NOW, on {tries} of {tries} replays; recorded as a {verdicts.Verdict.FLAKY_FAILURE} ({flaky}): "
            "passing here does not show it fixed"
        )
        return EXIT_OK
    if result.passed:
        print("PASSES NOW: every implementation agrees with the truth on this case")
        return EXIT_OK
    print("STILL FAILS: " + "; ".join(f"{s.implementation}: {s.failure}" for s in result.subjects if not s.passed))
    return EXIT_FAIL
