"""The gate's rows: what each compared thing's status is, and which group of the verdict it falls in."""

from __future__ import annotations

import dataclasses
import enum
from collections import defaultdict
from typing import Any


class Status(enum.StrEnum):
    """How a row moved, most urgent first (the order the table lists them in)."""

    WORSE = "worse"
    INCOMPLETE = "incomplete"
    MISSING = "missing"
    INSUFFICIENT = "insufficient"
    BETTER = "better"
    NEW = "new"
    NOT_COMPARED = "not compared"
    INCOMPARABLE = "incomparable"
    CHANGED = "changed"  # informational: the kernel lowered to other code (fails only with a worse figure)
    UNCHANGED = "unchanged"


STATUSES = tuple(Status)


class Group(enum.StrEnum):
    """What a row means for the verdict, in the order a verdict lists them."""

    REGRESSIONS = "regressions"  # the rows that fail
    IMPROVEMENTS = "improvements"
    NEW = "new"  # measured or runnable only in the candidate
    NOT_COMPARED = "not compared"  # no verdict either way, with the reason
    WITHIN_NOISE = "within noise"  # compared, and no move beyond its limit


GROUPS = tuple(Group)
CATEGORIES = (
    "correctness",
    "drift",
    "compile",
    "codegen",
    "outline",
    "compile time",
    "memory",
    "speed",
    "leak",
    "records",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    category: str  # one of CATEGORIES
    subject: str  # what was compared
    status: Status
    baseline: str  # the baseline's figure
    candidate: str  # the candidate's figure
    change: str  # the movement, in words and numbers
    detail: str = ""  # why, with the limit it was held to; for a failure, its case and repro command
    fails: bool = False

    @property
    def group(self) -> Group:
        if self.fails:
            return Group.REGRESSIONS
        return {
            Status.BETTER: Group.IMPROVEMENTS,
            Status.NEW: Group.NEW,
            Status.UNCHANGED: Group.WITHIN_NOISE,
            # Other kernel code with no figure worse for it: compared, and within every limit.
            Status.CHANGED: Group.WITHIN_NOISE,
        }.get(self.status, Group.NOT_COMPARED)


def fmt_seconds(s: float) -> str:  # pragma: no mutate block
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def grouped(recs: list[Any], key: Any) -> dict[tuple[str, ...], list[Any]]:
    """Records by `key` (a function of one record), each key's in their order."""
    out: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    for r in recs:
        out[key(r)].append(r)
    return out
