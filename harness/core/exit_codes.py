"""The CLI's exit codes, and the entry that runs the CLI in another environment.

Standard library only, and no harness imports: the noxfile loads this file by path before
the harness's dependencies are installed, and the environment tooling (harness.environments.upgrade,
harness.environments.bisect, the matrix) runs ENTRY without importing the CLI.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3
# An interrupted run ends with exit 1: what it finished is on disk, but it is not a pass.
EXIT_INTERRUPTED = EXIT_FAIL
# `run`: no discrepancy, but some kernel cannot run here (Implementation.cannot_run): never a pass.
EXIT_CANNOT_RUN = 4
# `repro`: the installed release refuses the case (it raises its own error for an input it can be
# given; harness.core.contract.Refusal): no wrong answer, and `bisect` counts it on the good side.
EXIT_REFUSED = 5
# `python -c ENTRY COMMAND ARGS...` runs the CLI in another environment (a matrix cell, an upgrade
# or bisect side). main() already maps a crash to EXIT_HARNESS; this also catches one while importing
# the harness there (an API an old release lacks), which Python would end with 1, a discrepancy.
ENTRY = (
    "import sys, traceback\n"
    "try:\n"
    "    from harness.cli import main\n"
    "    code = main(sys.argv[1:])\n"
    "except Exception:\n"
    "    traceback.print_exc()\n"
    f"    code = {EXIT_HARNESS}\n"
    "sys.exit(code)\n"
)
# A `run` started by another harness process (a worker of `run --jobs`, an upgrade's run step) finds
# that parent's pid here and stops, as interrupted, when the parent dies
# (harness.running.worker.die_with_parent): it never runs on orphaned.
PARENT_PID_ENV = "ATTN_HARNESS_JOBS_PARENT_PID"
