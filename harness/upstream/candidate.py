"""What a candidate jax release brings a fork: the history bugs of the fork's kernel fixed after the
fork's base up to that release, each replayed on the fork (`upgrade --kernel K=MOD:ATTR --to jax==X`).

The base is found in the upstream sources already kept (`fork-base` fetches them); nothing is
downloaded here. The replays run in this environment: a bug is in the fork's module, whichever jax
the candidate side installs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.core.errors import InputError
from harness.gate.forks import upstream_of
from harness.upstream import Fork, examine, replays, sources
from harness.upstream.replays import Replay, Verdict

# The least similarity (difflib's ratio) to its closest release for a drop-in's module to be told as a copy of
# upstream's: a copy with edits scores 0.99 (36 lines changed of 1715), a module that wraps or calls upstream's
# kernel 0.02 (kernels/pallas_flash.py, tests/_fakes.py against flash_attention.py).
MIN_SIMILARITY = 0.5


@dataclasses.dataclass(frozen=True, kw_only=True)
class Brought:
    """The fixes release `to` brings that fork `fork` lacks; `why` says why none could be told ("" if they were)."""

    fork: str
    to: str
    base: str  # the fork's base ("" when it could not be found)
    replays: list[Replay]
    why: str

    @property
    def lacking(self) -> list[Replay]:
        return [r for r in self.replays if r.verdict is Verdict.STILL]


def brought(spec: str, to: str, *, store: Path | None = None, timeout_s: float = replays.DEFAULT_TIMEOUT_S) -> Brought:
    """The history bugs of `spec`'s kernel fixed after its base and no later than jax `to`, replayed on it."""
    store = sources.cache_dir() if store is None else store
    try:
        fork = Fork.named(spec)
        if not sources.stored(store, fork.kernel):
            raise InputError(
                f"no upstream source of {fork.kernel} kept in {store}: run `python -m harness fork-base {spec}` "
                "once (it downloads them)"
            )
        found = examine(fork, sources.sources(store, fork.kernel))
    except InputError as e:
        return Brought(fork=spec, to=to, base="", replays=[], why=str(e))
    if found.base.similarity < MIN_SIMILARITY:
        why = (
            f"{fork.file} is no copy of jax's {sources.path_of(fork.kernel)} (similarity {found.base.similarity:.2f} "
            f"with jax {found.base.release}, below {MIN_SIMILARITY}): upstream's fixes reach it with the jax installed"
        )
        return Brought(fork=spec, to=to, base="", replays=[], why=why)
    after = replays.fixed_after(fork.kernel, found.base.release, through=to)
    done = [replays.replay(bug, spec, timeout_s=timeout_s) for bug in after]
    return Brought(fork=spec, to=to, base=found.base.named, replays=done, why="")


def lines(b: Brought) -> list[str]:
    """`b` as `upgrade` prints it."""
    head = f"fork {b.fork}: upstream fixes jax {b.to} brings"
    if b.why:
        return [f"{head}: cannot tell: {b.why}"]
    if not b.replays:
        return [f"{head}: none (the history table lists no fix of its kernel after its base jax {b.base} up to it)"]
    lacking = f"; the fork lacks {len(b.lacking)}" if b.lacking else ""
    out = [f"{head} since its base jax {b.base}: {len(b.replays)}{lacking}"]
    for r in b.replays:
        out.append(f"  {r.bug.id} (fixed in {r.bug.fixed_in}; {r.bug.symptom}): {r.verdict}: {r.why}")
        if r.command:
            out.append(f"    replay: {r.command}")
    return out


def report(kernels: list[str], to: str | None, **kw) -> list[str]:
    """The lines of every fork among `kernels` (names as `--kernel` gives them) against candidate jax `to`;
    none when no kernel is a fork or the candidate's jax is unknown."""
    forks = [k for k in kernels if upstream_of(k) is not None]
    if not forks or to is None:
        return []
    return [line for k in forks for line in lines(brought(k, to, **kw))]
