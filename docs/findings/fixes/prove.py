"""Prove each bug's fix through the harness (`nox -s findings` runs this).

    python -m docs.findings.fixes.prove [NAME...]

For every finding whose [fix] table names a fix (harness/findings.py), four harness commands, each
with the exit code it must give:

  repro CASE                      1   the shrunk case still fails on the unfixed kernel it was found with
  repro CASE --kernel FIXED       0   and passes with the fix
  run --kernel FIXED RUN...       0   a full run of the fixed kernel passes
  run --kernel UNFIXED RUN...     1   where [fix] unfixed_run = "fails": the same run fails unfixed
                                  4   where unfixed_run = "cannot run": unfixed, the kernel cannot run at all

(`unfixed_run = "passes"` records, measured, that the run's budget does not meet the bug on the
unfixed kernel; the shrunk case is then the proof.) The two unfixed commands run with [fix] unfixed_env
added to the environment: a fix that is not a kernel edit (the TPU interpreter's) is left out by its
switch, and `fixed` and `unfixed` may then name the same kernel. Exits 1 when any command gives another code.

A fix whose kernels this environment cannot load (the installed jax lacks a module they wrap: jax 0.12.1 removed
the Pallas GPU ones) runs no command: it is "cannot run here", named in the last line, never a failed proof.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import findings
from harness.core.exit_codes import ENTRY, EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_OK

STEPS = ("repro unfixed", "repro fixed", "run fixed", "run unfixed")
# The exit code the unfixed run must give, per [fix] unfixed_run ("passes": the run is not made).
UNFIXED_RUN_EXIT = {"fails": EXIT_FAIL, "cannot run": EXIT_CANNOT_RUN}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    """One harness command of a proof and the exit code it must give."""

    name: str
    args: list[str]
    want: int
    env: dict[str, str] = dataclasses.field(default_factory=dict)  # added to this process's environment


def _harness(args: list[str], env: dict[str, str]) -> tuple[int, float, str]:
    start = time.perf_counter()
    env = {
        **os.environ,
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(findings.ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, cwd=findings.ROOT, env=env
    )
    lines = [x for x in (done.stdout + done.stderr).strip().splitlines() if x.strip()]
    return done.returncode, time.perf_counter() - start, (lines[-1] if lines else "")[:160]


def commands(f: findings.Finding, out: Path) -> list[Step]:
    """The harness commands that prove one finding's fix, each with the exit code it must give."""
    fix = f.fix
    assert fix is not None and fix.case is not None
    run = ["run", *fix.run, "--max-shrinks", "0", "--jobs", "1", "--no-database"]
    unfixed = fix.unfixed_env
    steps = [
        Step(name="repro unfixed", args=["repro", str(fix.case)], want=EXIT_FAIL, env=unfixed),
        Step(name="repro fixed", args=["repro", str(fix.case), "--kernel", fix.fixed], want=EXIT_OK),
        Step(name="run fixed", args=[*run, "--kernel", fix.fixed, "--out", str(out / "fixed")], want=EXIT_OK),
    ]
    if fix.unfixed_run in UNFIXED_RUN_EXIT:
        args = [*run, "--kernel", fix.unfixed, "--out", str(out / "unfixed")]
        steps.append(Step(name="run unfixed", args=args, want=UNFIXED_RUN_EXIT[fix.unfixed_run], env=unfixed))
    return steps


def cannot_run(f: findings.Finding) -> str | None:
    """Why this environment cannot load the fix's kernels (the installed jax lacks a module they wrap), or None.

    Checked here because `repro` and `run` exit 2 for a MODULE:ATTR kernel whose module cannot import, as for a
    misspelt one: the proof would read as failed.
    """
    from harness.core import contract
    from harness.runtime import versions

    for spec in (f.fix.fixed, f.fix.unfixed):
        target = spec.rpartition("=")[2]
        try:
            if ":" in target:
                importlib.import_module(target.partition(":")[0])
            contract.resolve(spec)
        except contract.NotLoadedHere as e:
            return str(e)
        except Exception as e:  # noqa: BLE001 - any other error is the fix's own: its commands fail on it
            if (gap := versions.missing_api(e)) is not None:
                return f"{spec!r} cannot run here: {gap}"
            return None
    return None


def prove(f: findings.Finding) -> bool:
    ok = True
    with tempfile.TemporaryDirectory(prefix=f"findings-{f.name}-") as tmp:
        for step in commands(f, Path(tmp)):
            code, seconds, last = _harness(step.args, step.env)
            ok &= code == step.want
            verdict = "ok" if code == step.want else f"WRONG (want exit {step.want})"
            print(f"  {step.name:14s} exit {code} {verdict:22s} {seconds:6.1f}s  {last}", flush=True)
    if f.fix.unfixed_run == "passes":
        print("  run unfixed    not run: this budget's run passes unfixed (measured); the shrunk case is the proof")
    return ok


def main(names: list[str]) -> int:
    proved = [f for f in findings.catalogue() if f.fix is not None and f.fix.fixed]
    unknown = sorted(set(names) - {f.name for f in proved})
    if unknown:
        print(f"no fix to prove for {unknown}; fixes: {[f.name for f in proved]}", file=sys.stderr)
        return 2
    failed, elsewhere = [], []
    for f in proved:
        if names and f.name not in names:
            continue
        print(f"{f.name}: {f.fix.fixed}", flush=True)
        why = cannot_run(f)
        if why is not None:
            print(f"  {why}", flush=True)
            elsewhere.append(f.name)
        elif not prove(f):
            failed.append(f.name)
    for f in findings.catalogue():
        if f.fix is not None and f.fix.upstream and (not names or f.name in names):
            print(f"{f.name}: fixed upstream ({f.fix.upstream}); nothing to prove on this release")
    verdict = f"NOT PROVED: {', '.join(failed)}" if failed else "every fix proved"
    if elsewhere:
        verdict += f"{'' if failed else ' that can run here'}; cannot run here: {', '.join(elsewhere)}"
    print(verdict)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
