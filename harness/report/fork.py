"""The report's fork section: each fork's base, drift and per-bug verdicts, from the fork records that
`fork-base` wrote into the stores (STORE/forks/, harness.upstream.record). Pure but for reading them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.upstream import record
from harness.upstream.lineage import State
from harness.upstream.record import BugRow, ForkRecord


@dataclasses.dataclass(frozen=True, kw_only=True)
class ForkView:
    fork: str
    file: str
    time: str
    jax: str  # the jax the replays ran under
    base: str  # "0.11.2", or "0.9.0 .. 0.10.1" when several releases have the same file
    closeness: str  # "2 lines changed (removed + added) against its 2644, similarity 0.9996"
    newest: str
    drift: list[tuple[str, int]]  # (state, hunks), every state
    linked: list[str]  # "@@ -316,7 +325,9 @@ missing, arrived in 0.12.0: SPL-5", hunks linked to a bug
    bugs: list[BugRow]
    verdict: str
    failed: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class ForkSection:
    forks: list[ForkView] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)  # fork records that do not read, one line each


def view(rec: ForkRecord) -> ForkView:
    b = rec.base
    links = []
    for h in rec.hunks:
        if h.links:
            named = ", ".join(ln["bug"] + (" (by release)" if ln["by"] == record.BY_RELEASE else "") for ln in h.links)
            links.append(f"{h.header} {h.state}, arrived in {h.arrived}: {named}")
    return ForkView(
        fork=rec.fork,
        file=rec.file,
        time=rec.time,
        jax=rec.jax or "unknown",
        base=b.release if b.same_through == b.release else f"{b.release} .. {b.same_through}",
        closeness=f"{b.changed} lines changed (removed + added) against its {b.base_lines}, "
        f"similarity {b.similarity:.4f}",
        newest=rec.newest,
        drift=[(str(s), rec.drift.get(str(s), 0)) for s in State],
        linked=links,
        bugs=rec.bugs,
        verdict=rec.verdict,
        failed=rec.code != 0,
    )


def section(roots: list[Path]) -> ForkSection:
    """The fork records in every store of `roots` (a run directory has none)."""
    views, problems = [], []
    for root in roots:
        found, bad = record.read(Path(root))
        views += [view(r) for r in found]
        problems += bad
    return ForkSection(forks=views, problems=problems)
