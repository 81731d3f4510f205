"""Every upstream fix replayed on a fork: for each bug of docs/data/history_bugs.json fixed after the
fork's base in its kernel, that bug's trigger run on the fork in this environment.

A bug's replay is, first found:

- a trigger script docs/history/triggers/ID.py, run as `python SCRIPT FORK` (exit 1 while the kernel
  has the bug, 0 once it does not, 4 when it cannot run here, as the finding scripts);
- a failure file docs/history/ID_*.json (the harness's own find on the affected release), replayed
  with `python -m harness repro FILE --kernel FORK` (exit 1 still fails, 0 passes, 5 refused).

Interpreter rows (INT) are fixes in jax's interpreters, not in a kernel module: the installed jax has
them or not whatever the fork holds, so they are not replayed here.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from harness.core.exit_codes import EXIT_FAIL, EXIT_OK, EXIT_REFUSED
from harness.upstream.lineage import Hunk
from harness.upstream.sources import KERNELS, release_key

ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "docs" / "data" / "history_bugs.json"
HISTORY = ROOT / "docs" / "history"
TRIGGERS = HISTORY / "triggers"
# A word of each fix's changed lines, where the history table's evidence names the lines: a hunk of
# the fix release links to the bug only if its changed lines hold the word (else by release alone).
FIX_WORDS = {
    "SPL-5": "dsinks",  # the sum of sinks_exp * o * do, now in float32 (0.11.2 -> 0.12.0 wheels)
}
# A replay's limit: a failure file of the history runs replays in under a minute on 2 cores.
DEFAULT_TIMEOUT_S = 300.0


class Verdict(enum.StrEnum):
    STILL = "still has it"
    FIXED = "fixed in the fork"
    UNKNOWN = "cannot tell here"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bug:
    """One row of the history table, as much as a replay needs."""

    id: str
    kernel: str  # the table's label ("splash")
    symptom: str
    fixed_in: str  # the first release with the fix ("0.6.2"), from the cell "0.6.2 (error)"
    fix_is_error: bool  # the fix refuses the input ("(error)" in the cell)
    cpu_visible: str  # the cell, "yes (probed): ..." or "no: ..."

    @property
    def visible(self) -> bool:
        return self.cpu_visible.startswith("yes")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replay:
    bug: Bug
    verdict: Verdict
    why: str  # the replay's last line, or why it could not be run
    command: str  # how to run it again ("" when there is nothing to run)


def bugs(kernel: str, *, path: Path = BUGS) -> list[Bug]:
    """The history table's bugs in `kernel`'s module (a harness kernel name), oldest fix first."""
    label = KERNELS[kernel][1]
    rows = json.loads(path.read_text())["rows"]
    out = []
    for r in rows:
        if r["kernel"] != label:
            continue
        release = re.match(r"\d+(\.\d+)+", r["fixed in"])
        if release is None:
            continue
        out.append(
            Bug(
                id=r["id"],
                kernel=r["kernel"],
                symptom=r["symptom"],
                fixed_in=release.group(0),
                fix_is_error="(error)" in r["fixed in"],
                cpu_visible=r["CPU-visible?"],
            )
        )
    return sorted(out, key=lambda b: release_key(b.fixed_in))


def fixed_after(kernel: str, base: str, *, through: str | None = None, path: Path = BUGS) -> list[Bug]:
    """The bugs of `kernel` whose fix came in a release after `base` (and no later than `through`, if given)."""
    last = release_key(through) if through is not None else None
    return [
        b
        for b in bugs(kernel, path=path)
        if release_key(b.fixed_in) > release_key(base) and (last is None or release_key(b.fixed_in) <= last)
    ]


def links(hunk: Hunk, bugs: list[Bug]) -> list[tuple[str, bool]]:
    """(bug id, linked by its fix word) for each bug of `bugs` whose fix `hunk` may be: the bug was fixed in
    the release the hunk arrived in and, where the project knows a word of the fix's lines (FIX_WORDS), the
    hunk's changed lines hold it; else the bug is linked by its release alone (False)."""
    release = hunk.arrived.split(" ")[0]
    changed = "".join(ln for ln in hunk.text.splitlines(keepends=True) if ln[:1] in "+-")
    out = []
    for b in bugs:
        word = FIX_WORDS.get(b.id)
        if b.fixed_in == release and (word is None or word in changed):
            out.append((b.id, word is not None))
    return out


def replay_of(bug: Bug, fork: str) -> list[str] | None:
    """The command that replays `bug` on `fork`, or None where the project has no trigger for it."""
    script = TRIGGERS / f"{bug.id}.py"
    if script.is_file():
        return [sys.executable, str(script), fork]
    files = sorted(HISTORY.glob(f"{bug.id}_*.json"))
    if files:
        return [sys.executable, "-m", "harness", "repro", str(files[0]), "--kernel", fork]
    return None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def replay(bug: Bug, fork: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Replay:
    """`bug`'s trigger run on `fork` here, and what it says."""
    if not bug.visible:
        return Replay(bug=bug, verdict=Verdict.UNKNOWN, why=f"not CPU-visible: {bug.cpu_visible}", command="")
    cmd = replay_of(bug, fork)
    if cmd is None:
        why = f"no trigger recorded: docs/history/ has no {bug.id}_*.json nor triggers/{bug.id}.py"
        return Replay(bug=bug, verdict=Verdict.UNKNOWN, why=why, command="")
    shown = " ".join(["python", *cmd[1:]])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_env(), check=False)
    except subprocess.TimeoutExpired:
        return Replay(bug=bug, verdict=Verdict.UNKNOWN, why=f"the replay ran past {timeout_s:g} s", command=shown)
    line = _last_line(done.stdout + done.stderr)
    return Replay(bug=bug, verdict=_verdict(bug, done.returncode), why=f"exit {done.returncode}: {line}", command=shown)


def _env() -> dict[str, str]:
    """This environment, with the working directory (where the fork's module is found, as `run --kernel`
    finds it) and the harness on the import path."""
    paths = [os.getcwd(), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _verdict(bug: Bug, code: int) -> Verdict:
    if code == EXIT_FAIL:
        return Verdict.STILL
    if code == EXIT_OK or (code == EXIT_REFUSED and bug.fix_is_error):
        return Verdict.FIXED
    return Verdict.UNKNOWN  # EXIT_CANNOT_RUN, a usage error, a crash: no answer either way
