"""The trigger search: a failure, once shrunk, reduced over its features to the ones it cannot fail without.

Shrinking leaves features the bug does not need (Hypothesis keeps a bias or a head group it cannot take away
without changing the draw; a smoke case is the smallest with all of its features). So each feature is left out
in turn (signatures.reductions), each candidate handed back to the search, which runs it and sends its verdict
("alike", "passed" or "otherwise", harness.running.search.Search.reduction): the search drives this generator,
so a run never climbs back into the search from here. The first candidate that fails alike is the new best,
until none can be left out or the shrink budget is spent. What is left is the trigger (Shrink.trigger): one
trigger, one bug (harness.running.distinct). A feature is shown needed (Shrink.needs) only where the same case
without it passed; one whose case failed another way is said so (Shrink.otherwise). A family's member (flash's
several major key blocks; splash's window mask) that another member replaces, failing alike, is named by its
family ("several key tiles", "a computable mask"), whichever member a shard shrank to. Last, the smallest case
with exactly the trigger, where smaller and failing alike, is the one reported (the reductions grow lengths and
heads so as to keep tiles); the trigger and what each feature was shown to be are those of the case before it.
"""

from __future__ import annotations

from collections.abc import Generator

from harness.core import features, pool
from harness.core.case import Case
from harness.core.contract import Implementation
from harness.running import signatures
from harness.running.distinct import Shrink

__all__ = ["reduce"]

# Yields each candidate case; is sent its verdict (Search.reduction): "alike" (failed as the failure being shrunk,
# which the search then makes shrink.best), "passed" (or not run: the budget is spent), or "otherwise".
Reduction = Generator[Case, str, None]


def reduce(shrink: Shrink, kernel: Implementation) -> Reduction:
    """Reduce `shrink.best` to its trigger, yielding each candidate to run and sent its verdict; sets
    shrink.trigger, needs and otherwise; shrink.trigger stays None where the budget runs out."""
    start = shrink.best  # as Hypothesis shrank it: reported where the budget runs out on a bigger best
    tried: dict[Case, str] = {shrink.best.case: "alike"}  # each candidate: failed alike, passed, or otherwise
    kept: set[str] = set()  # features an earlier best could not lose: tried last (signatures.reductions)
    shrink.needs, shrink.otherwise = set(), set()
    while not shrink.exhausted:
        have = features.of(shrink.best.case, kernel) - signatures.plain(kernel)
        replaced: set[str] = set()  # members of a family a case with another member fails alike without
        for left_out, candidate, edited in signatures.reductions(shrink.best.case, have, kernel, kept):
            if candidate is None:
                continue
            if candidate not in tried:
                tried[candidate] = yield candidate
                if tried[candidate] == "alike":
                    shrink.needs, shrink.otherwise = set(), set()
                    break  # a smaller failure of the same bug: shrink.best now; try its features
                if shrink.exhausted:
                    break
            elif tried[candidate] == "alike":  # tried for an earlier best
                replaced.add(left_out)
                continue
            kept.add(left_out)
            if edited:  # the same case without it passed, or failed another way
                (shrink.needs if tried[candidate] == "passed" else shrink.otherwise).add(left_out)
        else:
            # No feature can be left out: they are its trigger, each shown on this case. Last, the smallest case
            # with exactly the trigger, reported where it fails alike (it has the trigger's features and no other:
            # its features are not left out again, which took two or three more runs per failure, measured).
            shrink.trigger = signatures.trigger(have, replaced, kernel)
            yield from _smaller(shrink, shrink.trigger, kernel, tried)
            return
    # The budget ran out first: no trigger, and the smaller of the case Hypothesis shrank and the best so far
    # (lengths and heads are grown so as to keep tiles; the trigger's smallest case comes only at the end).
    if pool.size(shrink.best.case) > pool.size(start.case):
        shrink.best = start


def _smaller(shrink: Shrink, trigger: tuple[str, ...], kernel: Implementation, tried: dict) -> Reduction:
    """A smaller case with exactly the best's features: the smallest with the trigger (signatures.smallest_with),
    else the best in one batch row, one head, the least head_dim (signatures.least_shapes: its lengths and tiles
    kept). The first such case smaller than the best is run, and is the best where it fails alike (the search
    makes it so)."""
    for case in (signatures.smallest_with(trigger, kernel), signatures.least_shapes(shrink.best.case, kernel)):
        if case is not None and case not in tried and pool.size(case) < pool.size(shrink.best.case):
            tried[case] = yield case
            return
