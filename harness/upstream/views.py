"""The printed report of `fork-base`: one function per part, each returning its lines."""

from __future__ import annotations

from collections import Counter

from harness.upstream import Fork, Hunk, Lineage
from harness.upstream.lineage import State
from harness.upstream.replays import Bug, Replay, Verdict, links


def base(fork: Fork, found: Lineage) -> list[str]:
    b = found.base
    same = "" if b.same_through == b.release else f" (the same file through {b.same_through})"
    lines = [
        f"fork: {fork.spec} ({fork.file})",
        f"base: jax {b.release}{same}: {b.changed} lines changed (removed + added) against its "
        f"{b.base_lines}, similarity {b.similarity:.4f}",
        f"the fork's own edits, against jax {b.release}:",
    ]
    return lines + ([b.edits.rstrip("\n")] if b.edits else ["  none: the fork is that release's file"])


def fixed_by(hunk: Hunk, bugs: list[Bug]) -> list[str]:
    """The history bugs `hunk` may be the fix of (replays.links); "(by release)" marks a bug linked by its
    release alone."""
    return [i if by_word else f"{i} (by release)" for i, by_word in links(hunk, bugs)]


def hunks(found: Lineage, bugs: list[Bug], *, text: bool) -> list[str]:
    counts = Counter(h.state for h in found.hunks)
    told = ", ".join(f"{counts[s]} {s}" for s in State)
    lines = [f"upstream since jax {found.base.release}, to jax {found.newest}: {len(found.hunks)} hunks: {told}"]
    for h in found.hunks:
        ids = fixed_by(h, bugs)
        fix = f"; {h.arrived} fixed {', '.join(ids)}" if ids else ""
        lines.append(f"  {h.header} {h.state}, arrived in {h.arrived}{fix}")
        if text or (ids and h.state is not State.CARRIED and not ids[0].endswith("(by release)")):
            lines += ["    " + ln for ln in h.text.rstrip("\n").split("\n")]
    return lines


def replays(kernel: str, base_release: str, done: list[Replay]) -> list[str]:
    if not done:
        return [f"fixes replayed: the history table lists no bug of {kernel} fixed after jax {base_release}"]
    lines = [f"fixes replayed: {len(done)} bugs of {kernel} fixed upstream after jax {base_release}"]
    for r in done:
        lines.append(f"  {r.bug.id} (fixed in {r.bug.fixed_in}; {r.bug.symptom}): {r.verdict}: {r.why}")
        if r.command:
            lines.append(f"    replay: {r.command}")
    return lines


def verdict(done: list[Replay], *, replayed: bool = True) -> str:
    if not replayed:
        return f"NOT REPLAYED (--no-replay): {len(done)} upstream fixes after the base cannot be told"
    still = [r for r in done if r.verdict is Verdict.STILL]
    if still:
        named = "; ".join(f"{r.bug.id} (fixed upstream in {r.bug.fixed_in}; replay: {r.command})" for r in still)
        return f"FAIL: the fork still has {named}"
    unknown = sum(r.verdict is Verdict.UNKNOWN for r in done)
    return "OK: no replayed fix is missing from the fork" + (f" ({unknown} cannot be told here)" if unknown else "")
