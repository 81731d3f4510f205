"""The distinct failures of one search (harness.running.search): which failure is shrunk, which a failure
found before explains (harness.running.signatures), and how each reported one was shrunk."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from harness.core.case import Case
from harness.core.contract import Implementation
from harness.running import signatures
from harness.running.runner import CaseResult


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShrinkStats:
    """How one reported failure was shrunk."""

    runs: int = 0  # cases run while shrinking it
    exhausted: bool = False  # the shrink budget ran out before Hypothesis finished
    # False: reported as found (past the search's cap, harness.running.search.MAX_SHRUNK, or met while
    # shrinking another). Every shrunk failure is then reduced over its features (harness.running.trigger).
    shrunk: bool = True
    trigger: tuple[str, ...] | None = None  # Shrink.trigger: the features the failure cannot fail without
    needs: tuple[str, ...] = ()  # of those, the ones shown needed: the case without it was run and passed
    otherwise: tuple[str, ...] = ()  # of those, the ones whose case without it failed as another bug


class Found(Protocol):
    """Where the failures go: a search's outcome."""

    failures: list[CaseResult]
    shrinks: list[ShrinkStats]
    shrink_exhausted: bool


@dataclasses.dataclass(kw_only=True)
class Shrink:
    """The failure being shrunk: the first of its signature, the best so far, and its budget spent."""

    target: CaseResult
    best: CaseResult
    since: float
    runs: int = 0
    exhausted: bool = False
    extra_runs: int = 0  # runs past the budget the trigger search may take (harness.running.search.TRIGGER_SHARE)
    # The features the best cannot fail without (harness.running.trigger), once no feature can be left out;
    # None where the budget ran out first. `needs`: the features whose leaving out was tried and passed;
    # `otherwise`: those whose leaving out failed as another bug (signatures.symptom says which is the same).
    trigger: tuple[str, ...] | None = None
    needs: set[str] = dataclasses.field(default_factory=set)
    otherwise: set[str] = dataclasses.field(default_factory=set)


class Failures:
    """The distinct failures of one search, and the failing cases they explain."""

    def __init__(self, impl: Implementation, outcome: Found, *, first_only: bool, cap: int) -> None:
        self.impl, self.outcome, self.first_only, self.cap = impl, outcome, first_only, cap
        self.known: list[signatures.Signature] = []  # of outcome.failures, index by index
        self.explained: set[Case] = set()
        self.met: list[CaseResult] = []  # met while shrinking another, not yet explained
        self.shrunk = 0  # failures shrunk, those replaced by a more general one too

    def explains(self, result: CaseResult) -> bool:
        if result.case in self.explained:
            return True
        known = zip(self.known, self.outcome.shrinks, strict=True)
        return any(
            signatures.explains(sig, result, self.impl, anywhere=not s.shrunk, trigger=s.trigger is not None)
            for sig, s in known
        )

    def is_target(self, result: CaseResult, shrink: Shrink | None) -> bool:
        """Whether failing `result` is shrunk: a new failure (generating), or one like the target (shrinking)."""
        if self.first_only:
            return True  # any failure, as a search that stops at its first
        if self.explains(result):
            return False
        if shrink is None:
            return self.shrunk < self.cap
        return signatures.same_kind(result, shrink.best)  # the target's kind, or the symptom it was reduced to

    def note(self, result: CaseResult, shrink: Shrink | None) -> None:
        """A failure that is not shrunk: reported as found when nothing explains it."""
        if self.explains(result):
            return
        if shrink is None:
            self.add(result, ShrinkStats(shrunk=False))
        else:
            self.met.append(result)

    def add(self, result: CaseResult, stats: ShrinkStats, tried: Sequence[Case] = ()) -> None:
        """Report `result`; it and the cases `tried` count as explained from now on."""
        sig = signatures.signature(result, self.impl, stats.trigger)
        out = self.outcome
        gone: list[int] = []
        if stats.shrunk:
            # Shrunk to fewer features than a failure reported before, of the same kind: the same
            # bug, more generally (long keys fail at every query length, not only at unequal ones).
            # It takes the place of the first it replaces, so failures stay in the order found.
            reduced = stats.trigger is not None
            gone = [i for i, f in enumerate(out.failures) if signatures.explains(sig, f, self.impl, trigger=reduced)]
            for i in reversed(gone[1:]):
                del out.failures[i], out.shrinks[i], self.known[i]
            if gone:
                out.failures[gone[0]], out.shrinks[gone[0]], self.known[gone[0]] = result, stats, sig
        if not stats.shrunk or not gone:
            out.failures.append(result)
            out.shrinks.append(stats)
            self.known.append(sig)
        out.shrink_exhausted |= stats.exhausted
        self.explained |= {result.case, *tried}

    def finish(self, shrink: Shrink) -> None:
        self.shrunk += 1
        # The failing case drawn is explained (so that a search drawn again goes on past it), not every
        # candidate tried: a later shrink may need those on its way down.
        trigger = set(shrink.trigger or ())
        needs, otherwise = tuple(sorted(shrink.needs & trigger)), tuple(sorted(shrink.otherwise & trigger))
        stats = ShrinkStats(
            runs=shrink.runs, exhausted=shrink.exhausted, trigger=shrink.trigger, needs=needs, otherwise=otherwise
        )
        self.add(shrink.best, stats, [shrink.target.case])

    def next_met(self) -> CaseResult | None:
        """The first failure met while shrinking another that nothing reported since explains, taken off the list,
        while the cap of shrunk failures allows one more; else None."""
        while self.met and self.shrunk < self.cap:
            result = self.met.pop(0)
            if not self.explains(result):
                return result
        return None

    def settle_met(self) -> None:
        for result in self.met:
            if not self.explains(result):
                self.add(result, ShrinkStats(shrunk=False))
        self.met.clear()
