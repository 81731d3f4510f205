"""Which release changed the verdict: binary search over a package's released versions.

`bisect` orders the releases from the good end to the bad end (oldest first for a
regression, newest first for a fix), confirms the bad end, then halves the range, one
replay per step, until a release that passes sits next to one that fails. A release that
cannot be installed or replayed here is reported and skipped: it is never counted as good
or bad, and the search goes on around it. A release whose library refuses the case (its own
error for an input it can be given: `repro` exits EXIT_REFUSED) gives no wrong answer: it counts on
the good side, and the boundary says so (a wrong answer that became an error, docs/history.md MHA-3).
An optional package that cannot install beside a release (tokamax before jax 0.9.2) is left out
of that release's environment, and its step says so.

The two steps that touch the world are injected: `try_version(version) -> Step` builds the
environment and replays there. `replayer` makes the real one: an environment per version
(harness.environments.envs, cached) and a replay command in it, whose exit status says the verdict
(0 good, 1 bad, EXIT_REFUSED refused, anything else: could not run).
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.core.errors import InputError
from harness.core.exit_codes import ENTRY, EXIT_FAIL, EXIT_OK, EXIT_REFUSED
from harness.environments import envs

GOOD, BAD, SKIPPED, REFUSED = "good", "bad", "skipped", "refused"
# The outcomes on the good side: the replay passes, or the release refuses the case.
NO_WRONG_ANSWER = (GOOD, REFUSED)
# A replay exits 0 (passes), 1 (still fails), 5 (the release refuses the case), 2 (cannot be
# replayed) or 3 (crashed). Python also exits 1 on an uncaught exception, so the replay runs
# through this wrapper, which turns a crash (say, an API the harness needs that an old release
# lacks) into 3.
REPLAY = ENTRY


class BisectError(InputError):
    """Bad input for a bisect (a version the index does not list, good == bad): one line, exit 2."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    """One release tried: its verdict and the command that replays it there."""

    version: str
    outcome: str  # GOOD, BAD, REFUSED or SKIPPED
    detail: str  # the replay's last line, or why the release was skipped
    command: str  # the replay command in that release's environment ("" when it could not be built)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BisectResult:
    package: str
    direction: str  # "regression" (good older than bad) or "fix" (bad older than good)
    versions: tuple[str, ...]  # the releases searched, from the good end to the bad end
    steps: tuple[Step, ...]  # in the order they ran
    last_good: Step | None
    first_bad: Step | None
    untested: tuple[str, ...]  # releases between last_good and first_bad that could not be tried
    problem: str = ""  # why no boundary was found, when none was

    @property
    def replays(self) -> int:
        """Replays that ran (a release that could not be installed ran none)."""
        return sum(s.outcome != SKIPPED or bool(s.command) for s in self.steps)

    @property
    def found(self) -> bool:
        return self.last_good is not None and self.first_bad is not None


def between(versions: list[str], good: str, bad: str) -> list[str]:
    """The releases from `good` to `bad` inclusive, in that order; `versions` oldest first."""
    missing = [v for v in (good, bad) if v not in versions]
    if missing:
        shown = ", ".join(versions[-30:]) or "none"
        raise BisectError(f"version {missing[0]} is not a release the index lists; available: {shown}")
    if good == bad:
        raise BisectError(f"--good and --bad are the same release {good}; give two different releases")
    i, j = versions.index(good), versions.index(bad)
    return versions[i : j + 1] if i < j else versions[j : i + 1][::-1]


def search(package: str, seq: list[str], try_version: Callable[[str], Step], *, direction: str) -> BisectResult:
    """Binary search on `seq` (good end first): the bad end is replayed first, the good end only if needed."""
    steps: list[Step] = []
    outcome: dict[int, str] = {}

    def probe(i: int) -> str:
        step = try_version(seq[i])
        steps.append(step)
        outcome[i] = step.outcome
        return step.outcome

    def result(lo: int | None, hi: int | None, problem: str = "") -> BisectResult:
        by_version = {s.version: s for s in steps}
        untested = tuple(seq[k] for k in range(lo + 1, hi)) if lo is not None and hi is not None else ()
        return BisectResult(
            package=package,
            direction=direction,
            versions=tuple(seq),
            steps=tuple(steps),
            last_good=by_version.get(seq[lo]) if lo is not None else None,
            first_bad=by_version.get(seq[hi]) if hi is not None else None,
            untested=untested,
            problem=problem,
        )

    n = len(seq)
    end = probe(n - 1)
    if end == SKIPPED:
        return result(None, None, f"the bad end {seq[-1]} could not be tried: {steps[-1].detail}")
    if end in NO_WRONG_ANSWER:
        how = "passes" if end == GOOD else "is refused"
        return result(None, None, f"the replay {how} at the bad end {seq[-1]}: nothing to bisect")
    lo, hi = 0, n - 1  # lo: good (assumed until replayed), hi: bad
    while True:
        # The middle of the untried releases strictly between lo and hi; skipped ones are out.
        open_ = [k for k in range(lo + 1, hi) if outcome.get(k) != SKIPPED]
        if not open_:
            break
        mid = open_[(len(open_) - 1) // 2]
        verdict = probe(mid)
        if verdict in NO_WRONG_ANSWER:
            lo = mid
        elif verdict == BAD:
            hi = mid
    if lo == 0 and 0 not in outcome:  # the good end was only assumed: confirm it
        first = probe(0)
        if first == BAD:
            return result(None, hi, f"the replay fails at the good end {seq[0]} too: every release tried fails")
        if first == SKIPPED:
            return result(None, hi, f"the good end {seq[0]} could not be tried: {steps[-1].detail}")
    return result(lo, hi)


def replayer(
    env_for: Callable[[str], envs.EnvSpec],
    argv: Callable[[envs.Env], list[str]],
    *,
    root: Path | None = None,
    log: Callable[[str], None] = print,
    timeout: float | None = None,
    pythons: list[str] | None = None,
) -> Callable[[str], Step]:
    """The real `try_version`: build (or reuse) the version's environment, on the first of `pythons` (default:
    the spec's own) its pins install on, and run `argv(env)` in it."""

    def try_version(version: str) -> Step:
        spec = env_for(version)
        try:
            env = envs.build_first(spec, pythons or [spec.python], root, log=log)
        except envs.EnvError as e:
            log(f"  {version}: SKIPPED, {e}")
            return Step(version=version, outcome=SKIPPED, detail=f"cannot install: {e}", command="")
        cmd = argv(env)
        line = shlex.join(cmd)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=envs.side_env())
        except subprocess.TimeoutExpired:
            log(f"  {version}: SKIPPED, the replay ran past {timeout} s")
            return Step(version=version, outcome=SKIPPED, detail=f"the replay ran past {timeout} s", command=line)
        tail = (done.stdout + done.stderr).strip().splitlines()
        last = tail[-1] if tail else f"exit {done.returncode}"
        outcome = {EXIT_OK: GOOD, EXIT_FAIL: BAD, EXIT_REFUSED: REFUSED}.get(done.returncode, SKIPPED)
        detail = last if outcome != SKIPPED else f"the replay could not run (exit {done.returncode}): {last}"
        detail += without(env)
        log(f"  {version}: {outcome.upper()}  ({last}){without(env)}")
        return Step(version=version, outcome=outcome, detail=detail, command=line)

    return try_version


def without(env: envs.Env) -> str:
    """What the environment was built without (envs.OPTIONAL_PACKAGES), for a step's line; "" when nothing."""
    left = env.left_out()
    return f" [built without {', '.join(sorted(left))}: cannot install beside this release]" if left else ""


def harness_replay(file: Path) -> Callable[[envs.Env], list[str]]:
    """`python -m harness repro FILE` in the environment, with a crash reported as one (exit 3), not a failure
    (a release that refuses the case: exit 5, EXIT_REFUSED)."""
    return lambda env: [str(env.python), "-c", REPLAY, "repro", str(file)]


def format_result(r: BisectResult) -> str:
    """What bisect prints at the end: where the verdict changes, with the replay command for each side."""
    lines = [
        f"bisect {r.package} ({r.direction}): {len(r.versions)} releases from {r.versions[0]} (good) "
        f"to {r.versions[-1]} (bad), {r.replays} replays"
    ]
    for s in r.steps:
        lines.append(f"  {s.version:<12} {s.outcome.upper():<8} {s.detail}")
    skipped = [s.version for s in r.steps if s.outcome == SKIPPED]
    if skipped:
        lines.append(f"skipped (could not install or run here, counted neither good nor bad): {', '.join(skipped)}")
    if not r.found:
        lines.append(f"NO BOUNDARY: {r.problem}")
        return "\n".join(lines)
    good, bad = r.last_good, r.first_bad
    assert good is not None and bad is not None
    refuses = " (it refuses the case: no wrong answer, an error)" if good.outcome == REFUSED else ""
    if r.direction == "regression":
        lines.append(f"last good release: {r.package}=={good.version}{refuses}")
        lines.append(f"first bad release: {r.package}=={bad.version}")
    else:
        lines.append(f"first release with the fix: {r.package}=={good.version} (require >= {good.version}){refuses}")
        lines.append(f"last release that fails:    {r.package}=={bad.version}")
    if r.untested:
        lines.append(
            f"  the verdict changes between {good.version} and {bad.version}; not tried: {', '.join(r.untested)}"
        )
    lines.append(f"replay good: {good.command}")
    lines.append(f"replay bad:  {bad.command}")
    return "\n".join(lines)
