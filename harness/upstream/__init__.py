"""What upstream fixed that a fork still lacks: its base release, its drift, every fix replayed.

    fork = Fork.named("pallas_flash=mymod:flash_attention")
    report = examine(fork, sources.sources(store, fork.kernel))   # base, fork edits, upstream hunks
    replays = [replays.replay(bug, fork.spec) for bug in replays.fixed_after(fork.kernel, report.base.release)]

Modules: sources (each release's module text, fetched from the wheels once), lineage (the base and
the hunks, pure), replays (the history table's bugs run on the fork), views (the printed report),
record (the same as one JSON record: `--json`, STORE/forks/, the report's fork section), candidate
(the fixes a candidate jax brings that the fork lacks, for `upgrade`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from harness.core.errors import InputError
from harness.gate.forks import upstream_of
from harness.upstream import lineage, sources
from harness.upstream.lineage import Base, Hunk, State
from harness.upstream.sources import Source

__all__ = ["Base", "Fork", "Hunk", "Lineage", "Source", "State", "examine"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fork:
    """A drop-in as `run --kernel` names it, and the text of the module that defines it."""

    spec: str  # "pallas_flash=mymod:flash_attention"
    kernel: str  # the built-in it replaces
    file: Path
    text: str

    @classmethod
    def named(cls, spec: str) -> Fork:
        """The fork `spec` names; its module's file is found without running it."""
        kernel = upstream_of(spec)
        if kernel is None:
            raise InputError(
                f"{spec!r} names no fork: give KERNEL=MODULE:ATTR, e.g. pallas_flash=mymod:flash_attention"
            )
        sources.path_of(kernel)
        module = spec.rpartition("=")[2].partition(":")[0]
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:
            found, why = None, str(e)
        else:
            why = "not found on the import path"
        if found is None or not found.origin or not Path(found.origin).is_file():
            raise InputError(
                f"module {module!r} of {spec!r}: {why}; run from the folder that holds it or set PYTHONPATH"
            )
        return cls(spec=spec, kernel=kernel, file=Path(found.origin), text=Path(found.origin).read_text())


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lineage:
    """The fork's base, and upstream's hunks from the base to the newest release known."""

    base: Base
    newest: str
    hunks: list[Hunk]


def examine(fork: Fork, known: list[Source]) -> Lineage:
    """The fork's base among `known` (oldest first) and upstream's hunks since, placed against the fork."""
    if not known:
        raise InputError(
            f"no upstream source of {fork.kernel}'s module ({sources.path_of(fork.kernel)}): "
            "fetch the releases (drop --offline) or give --sources DIR"
        )
    base = lineage.base_of(fork.text, known, fork_name=str(fork.file))
    at = next(i for i, s in enumerate(known) if s.release == base.release)
    newest = known[-1]
    hunks = lineage.hunks(known[at], newest, fork.text, known[at + 1 :]) if at < len(known) - 1 else []
    return Lineage(base=base, newest=newest.release, hunks=hunks)
