"""A fork's base release, its own edits, and upstream's changes since, each hunk carried, missing or
in conflict. Pure: texts in, plain data out (harness.upstream.views prints it).

The base is the release whose module differs from the fork's in the fewest lines (`changed`:
lines removed plus lines added, as a unified diff counts them); releases with the same file are one
candidate, named by the oldest and told as a range. Upstream's hunks are the diff of the base's
module against the newest release's, with CONTEXT lines either side:

- carried: the fork holds the hunk's new text, context included (it took the change);
- missing: no fork edit touches the lines the hunk changes (the fork still has the base's text);
- conflicts: a fork edit touches those lines and the hunk's new text is not in the fork.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum

from harness.upstream.sources import Source

# Context lines kept either side of a hunk, as `diff -u`: enough that a hunk's new text, with its
# context, names one place in a file (a bare "return out" would match anywhere).
CONTEXT = 3


class State(enum.StrEnum):
    CARRIED = "carried"
    MISSING = "missing"
    CONFLICTS = "conflicts"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Base:
    """The release a fork's module is closest to."""

    release: str  # the oldest release with this file
    same_through: str  # the newest release with the same file (== release when one)
    changed: int  # lines removed plus added from the base's module to the fork's
    base_lines: int
    similarity: float  # difflib's ratio, 1.0 for the same file
    edits: str  # the fork's own edits: a unified diff, base -> fork

    @property
    def named(self) -> str:
        return self.release if self.same_through == self.release else f"{self.release} .. {self.same_through}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Hunk:
    """One hunk of upstream's diff from the base to the newest release, and where the fork stands on it."""

    header: str  # "@@ -a,b +c,d @@"
    text: str  # the hunk's lines, " ", "-", "+" prefixed
    state: State
    arrived: str  # the first release after the base whose module holds the hunk's new text


def _matcher(a: list[str], b: list[str]) -> difflib.SequenceMatcher:
    # No autojunk: blank lines are over 1% of a kernel module and would be left out of matching.
    return difflib.SequenceMatcher(None, a, b, autojunk=False)


def changed_lines(a: list[str], b: list[str]) -> int:
    """Lines removed plus lines added from `a` to `b`."""
    return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in _matcher(a, b).get_opcodes() if tag != "equal")


def _distinct(sources: list[Source]) -> list[tuple[Source, str]]:
    """Each run of releases with the same file, as (its oldest, its newest release name)."""
    runs: list[tuple[Source, str]] = []
    for s in sources:
        if runs and runs[-1][0].text == s.text:
            runs[-1] = (runs[-1][0], s.release)
        else:
            runs.append((s, s.release))
    return runs


def base_of(fork: str, sources: list[Source], *, fork_name: str = "fork") -> Base:
    """The release among `sources` (oldest first) closest to the fork's text; the newer of a tie."""
    if not sources:
        raise ValueError("no upstream sources to compare the fork with")
    lines = fork.splitlines(keepends=True)
    scored = [(changed_lines(s.lines, lines), i, s, last) for i, (s, last) in enumerate(_distinct(sources))]
    changed, _, best, last = min(scored, key=lambda t: (t[0], -t[1]))
    edits = difflib.unified_diff(best.lines, lines, f"jax {best.release}", fork_name, n=CONTEXT)
    return Base(
        release=best.release,
        same_through=last,
        changed=changed,
        base_lines=len(best.lines),
        similarity=_matcher(best.lines, lines).ratio(),
        edits="".join(edits),
    )


def _contains(lines: list[str], block: list[str]) -> bool:
    n = len(block)
    return n == 0 or any(lines[i : i + n] == block for i, line in enumerate(lines) if line == block[0])


def _touches(a1: int, a2: int, i1: int, i2: int) -> bool:
    """Whether base lines [a1, a2) and [i1, i2) overlap; an insertion (empty range) touches its neighbours."""
    if a1 < a2 and i1 < i2:
        return a1 < i2 and i1 < a2
    return a1 <= i2 and i1 <= a2


def hunks(base: Source, newest: Source, fork: str, between: list[Source]) -> list[Hunk]:
    """Upstream's hunks from `base` to `newest`, each placed against the fork; `between`: the releases
    after the base up to the newest, oldest first, to name the release each hunk arrived in."""
    a, b, f = base.lines, newest.lines, fork.splitlines(keepends=True)
    fork_edits = [(i1, i2) for tag, i1, i2, _, _ in _matcher(a, f).get_opcodes() if tag != "equal"]
    out = []
    for group in _matcher(a, b).get_grouped_opcodes(CONTEXT):
        first, last = group[0], group[-1]
        changes = [op for op in group if op[0] != "equal"]
        new_text = b[first[3] : last[4]]
        if _contains(f, new_text):
            state = State.CARRIED
        elif any(_touches(e1, e2, op[1], op[2]) for e1, e2 in fork_edits for op in changes):
            state = State.CONFLICTS
        else:
            state = State.MISSING
        arrived = next((s.release for s in between if _contains(s.lines, new_text)), newest.release)
        header = f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"
        out.append(Hunk(header=header, text=_hunk_text(a, b, group), state=state, arrived=arrived))
    return out


def _hunk_text(a: list[str], b: list[str], group: list[tuple[str, int, int, int, int]]) -> str:
    lines = []
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            lines += [" " + s for s in a[i1:i2]]
            continue
        lines += ["-" + s for s in a[i1:i2]] + ["+" + s for s in b[j1:j2]]
    return "".join(s if s.endswith("\n") else s + "\n" for s in lines)
