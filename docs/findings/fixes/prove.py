"""Prove each bug's fix through the harness (`nox -s findings` runs this).

    python -m docs.findings.fixes.prove [NAME...]

For every finding whose [fix] table names a fix (harness/findings.py), four harness commands, each
with the exit code it must give:

  repro CASE                      1   the shrunk case still fails on the unfixed kernel it was found with
  repro CASE --kernel FIXED       0   and passes with the fix
  run --kernel FIXED RUN...       0   a full run of the fixed kernel passes
  run --kernel UNFIXED RUN...     1   where [fix] unfixed_run = "fails": the same run fails unfixed

(`unfixed_run = "passes"` records, measured, that the run's budget does not meet the bug on the
unfixed kernel; the shrunk case is then the proof.) Exits 1 when any command gives another code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import findings
from harness.core.exit_codes import ENTRY

STEPS = ("repro unfixed", "repro fixed", "run fixed", "run unfixed")


def _harness(*args: str) -> tuple[int, float, str]:
    start = time.perf_counter()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(findings.ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, cwd=findings.ROOT, env=env
    )
    lines = [x for x in (done.stdout + done.stderr).strip().splitlines() if x.strip()]
    return done.returncode, time.perf_counter() - start, (lines[-1] if lines else "")[:160]


def commands(f: findings.Finding, out: Path) -> list[tuple[str, list[str], int]]:
    """(step, harness arguments, the exit code it must give) for one finding's fix."""
    fix = f.fix
    assert fix is not None and fix.case is not None
    run = ["run", *fix.run, "--max-shrinks", "0", "--jobs", "1", "--no-database"]
    steps = [
        ("repro unfixed", ["repro", str(fix.case)], 1),
        ("repro fixed", ["repro", str(fix.case), "--kernel", fix.fixed], 0),
        ("run fixed", [*run, "--kernel", fix.fixed, "--out", str(out / "fixed")], 0),
    ]
    if fix.unfixed_run == "fails":
        steps.append(("run unfixed", [*run, "--kernel", fix.unfixed, "--out", str(out / "unfixed")], 1))
    return steps


def prove(f: findings.Finding) -> bool:
    ok = True
    with tempfile.TemporaryDirectory(prefix=f"findings-{f.name}-") as tmp:
        for step, args, want in commands(f, Path(tmp)):
            code, seconds, last = _harness(*args)
            ok &= code == want
            verdict = "ok" if code == want else f"WRONG (want exit {want})"
            print(f"  {step:14s} exit {code} {verdict:22s} {seconds:6.1f}s  {last}", flush=True)
    if f.fix.unfixed_run != "fails":
        print("  run unfixed    not run: this budget's run passes unfixed (measured); the shrunk case is the proof")
    return ok


def main(names: list[str]) -> int:
    proved = [f for f in findings.catalogue() if f.fix is not None and f.fix.fixed]
    unknown = sorted(set(names) - {f.name for f in proved})
    if unknown:
        print(f"no fix to prove for {unknown}; fixes: {[f.name for f in proved]}", file=sys.stderr)
        return 2
    failed = []
    for f in proved:
        if names and f.name not in names:
            continue
        print(f"{f.name}: {f.fix.fixed}", flush=True)
        if not prove(f):
            failed.append(f.name)
    for f in findings.catalogue():
        if f.fix is not None and f.fix.upstream and (not names or f.name in names):
            print(f"{f.name}: fixed upstream ({f.fix.upstream}); nothing to prove on this release")
    print("every fix proved" if not failed else f"NOT PROVED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
