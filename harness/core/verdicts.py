"""What each verdict word means, defined once: the runner decides by these rules, and the console, the
store, the report, the gate and the exit code read the words from here.

- pass: every comparison of the case within its bound, under the interpreter that gave the verdict.
- failure: the kernel's wrong answer, error, crash, exit or hang on a case, failing again when replayed
  under the same interpreter. A kernel that crashes, exits, hangs or raises fails under any interpreter:
  never an interpreter divergence.
- flaky failure: a failure whose result changes between calls on the same inputs, under any interpreter:
  it did not fail again when the same case was replayed under the same interpreter, or the kernel's own
  rerun of the case on fresh copies of its inputs returned other bits (the reproducible row failed). The
  worst kind to ship: it fails the run like any failure, reported with its replays.
- interpreter divergence: the fast interpreter's numbers differ from the truth (or from the faithful
  interpreter's) the same way on replay, bit for bit, with no change between its calls, while the
  faithful interpreter passes; each of the two ran to completion. A finding about an interpreter: it
  does not fail the run. Anything else the fast interpreter fails is the kernel's.
- oracle finding: an oracle outside its own tolerance; reported apart, never fails a kernel or the run.
- cannot run here: no interpreter here runs the kernel (an interpreter's or the release's gap); exit 4.

A run exits 0 only when every case it planned was checked and passed: a kernel row with no case
checked never passes.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class Verdict(enum.StrEnum):
    PASS = "pass"
    FAILURE = "failure"
    FLAKY_FAILURE = "flaky failure"
    DIVERGENCE = "interpreter divergence"
    ORACLE_FINDING = "oracle finding"
    CANNOT_RUN = "cannot run here"


# The verdicts that fail a run (exit 1).
FAILS_THE_RUN = frozenset({Verdict.FAILURE, Verdict.FLAKY_FAILURE})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replay:
    """One more run of a failing case: under which interpreter (None: not interpreted), whether it passed,
    and the digest of what it returned (None where it raised or died)."""

    interpreter: str | None
    passed: bool
    digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"interpreter": self.interpreter, "passed": self.passed, "digest": self.digest}

    @classmethod
    def from_json(cls, doc: Any) -> Replay:
        if not isinstance(doc, dict) or not isinstance(doc.get("passed"), bool):
            raise ValueError(f"a replay is an object with a boolean 'passed', got {doc!r:.80}")
        return cls(interpreter=doc.get("interpreter"), passed=doc["passed"], digest=doc.get("digest"))


# The comparison row of a case's rerun against its first run (harness.running.determinism.REPRODUCIBLE): failed,
# the kernel returned other bits for the same inputs.
RERUN = "reproducible"


def changed(comparisons: Any) -> bool:
    """Whether a kernel's result changed between calls on the same inputs: its rerun row failed. Takes the
    comparisons of a result or of a record (objects or their JSON)."""
    for c in comparisons or ():
        quantity = c.get("quantity") if isinstance(c, dict) else getattr(c, "quantity", None)
        passed = c.get("passed") if isinstance(c, dict) else getattr(c, "passed", True)
        if quantity == RERUN and passed is False:
            return True
    return False


def flaky(passed: bool, interpreter: str | None, replays: tuple[Replay, ...], *, changed: bool = False) -> bool:
    """A failure whose result changes between calls: it passed when replayed under the interpreter that failed
    it, or (`changed`) its own rerun returned other bits."""
    return not passed and (changed or any(r.passed for r in replays if r.interpreter == interpreter))


def replay_line(interpreter: str | None, replays: tuple[Replay, ...], *, changed: bool = False) -> str:
    """'failed, then passed 1 of 1 replays under the fast interpreter' and the like."""
    same = [r for r in replays if r.interpreter == interpreter]
    under = f" under the {interpreter} interpreter" if interpreter else ""
    passed = sum(r.passed for r in same)
    line = f"failed once, then passed {passed} of {len(same)} replay{'s' if len(same) != 1 else ''}{under}"
    if changed:
        line = f"its result changed between calls on the same inputs{under}; {line}"
    others = [r for r in replays if r.interpreter != interpreter]
    for r in others:
        line += f"; {'passed' if r.passed else 'failed'} under the {r.interpreter} interpreter"
    return line


def replays_from_json(doc: Any) -> tuple[Replay, ...]:
    """A record's "replays" list; ValueError naming what is wrong with it."""
    if not isinstance(doc, list):
        raise ValueError(f"replays={doc!r:.80}; expected a list")
    return tuple(Replay.from_json(r) for r in doc)


def flaky_suffix(passed: bool, interpreter: str | None, replays: tuple[Replay, ...], *, changed: bool = False) -> str:
    """' (flaky failure: ...)' after a failure's line where it is flaky, else '': one wording for the failure
    file, the console and the report."""
    if not flaky(passed, interpreter, replays, changed=changed):
        return ""
    return f" ({Verdict.FLAKY_FAILURE}: {replay_line(interpreter, replays, changed=changed)})"
