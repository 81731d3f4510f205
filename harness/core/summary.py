"""A run's summary row (run.json "summary"): how one kernel, oracle or interpreter pair did in one run.

`run` writes them (harness.running.summaries), the shards of `run --jobs` merge them
(harness.running.jobs), and the console, the report and the coverage of a store read them,
all through `KernelSummary`. Here in the core because the lowest of those readers is
(harness.core.coverage); the statuses are harness.store.schema.KernelStatus's values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, Self

from harness.core.compare import Comparison
from harness.core.errors import InputError
from harness.core.features import Coverage

ORACLE_SUFFIX = " (oracle)"
DIVERGENCE_SUFFIX = " (fast vs faithful)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelSummary:
    """One summary row. `kernel` names the row: a kernel's spec, "<oracle> (oracle)" for an oracle's,
    "<kernel> (fast vs faithful)" for a kernel's interpreter divergences."""

    kernel: str
    examples: int  # cases checked
    failed: int
    worst: float | None  # error/bound: the failing worst on a failure, else the passing worst (worst_used)
    seconds: float
    status: str  # a harness.store.schema.KernelStatus value
    oracle: bool = False  # an oracle's row: its findings never fail a kernel or the run
    divergence: bool = False  # a kernel's two interpreters compared: never a kernel failure
    pairwise: dict[str, Any] | None = None  # a kernel's pairwise coverage (harness.core.features.Coverage)
    error: str | None = None  # why the kernel cannot run here

    @property
    def name(self) -> str:
        """The implementation the row is about (an oracle's name without its suffix)."""
        return self.kernel.removesuffix(ORACLE_SUFFIX)

    @property
    def is_kernel(self) -> bool:
        """A kernel's own row: the rows that decide a run's exit status."""
        return not self.oracle and not self.divergence

    @property
    def seconds_per_case(self) -> float | None:
        return self.seconds / self.examples if self.examples else None

    def coverage(self) -> Coverage | None:
        """The pairwise coverage the row records (None for oracles and rows written before it); ValueError
        when it cannot be read."""
        return None if self.pairwise is None else Coverage.from_json(self.pairwise)

    def to_json(self) -> dict[str, Any]:
        """The row as run.json holds it: the optional fields only where set, as earlier releases wrote them."""
        doc: dict[str, Any] = {
            "kernel": self.kernel,
            "examples": self.examples,
            "failed": self.failed,
            "worst": self.worst,
            "seconds": self.seconds,
            "status": str(self.status),
        }
        doc |= {"oracle": True} if self.oracle else {}
        doc |= {"divergence": True} if self.divergence else {}
        doc |= {"pairwise": self.pairwise} if self.pairwise is not None else {}
        doc |= {"error": self.error} if self.error is not None else {}
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> Self:
        """A row of run.json's summary; InputError naming what is wrong with it."""
        if not isinstance(doc, dict) or not isinstance(doc.get("kernel"), str):
            raise InputError(f"a run summary row names no kernel: {doc!r:.120}")
        try:
            return cls(
                kernel=doc["kernel"],
                examples=int(doc["examples"]),
                failed=int(doc["failed"]),
                worst=None if doc.get("worst") is None else float(doc["worst"]),
                seconds=float(doc["seconds"]),
                status=str(doc["status"]),
                oracle=bool(doc.get("oracle", False)),
                divergence=bool(doc.get("divergence", False)),
                pairwise=doc.get("pairwise"),
                error=doc.get("error"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"run summary row of {doc['kernel']!r} is unreadable ({type(e).__name__}: {e})") from None

    @classmethod
    def rows_of(cls, summary: Any) -> list[Self]:
        """The kernel rows of a run.json "summary" (a bench, compile or leak run's rows name no kernel)."""
        rows: Iterable[Any] = summary if isinstance(summary, list) else []
        return [cls.from_json(r) for r in rows if isinstance(r, dict) and r.get("kernel")]


class Judged(Protocol):
    """One implementation's verdict on one case, as the worst column reads it (harness.running.runner.SubjectResult)."""

    @property
    def passed(self) -> bool: ...

    @property
    def comparisons(self) -> Sequence[Comparison]: ...


def worst_used(subjects: Iterable[Judged]) -> float | None:
    """A row's worst error/bound, the number beside its verdict, so that the two agree: where any case failed,
    the largest error/bound of the failing comparisons (inf where an error is not finite or a comparison failed
    that has no bound to divide by; None where every failure raised before a comparison); else the largest of
    the passing comparisons, how much of its tolerance the closest case used (None where none has a bound)."""
    subjects = list(subjects)
    failing = [c for s in subjects if not s.passed for c in s.comparisons if not c.passed]
    if any(not s.passed for s in subjects):
        # A failed comparison without a measurable share (an exact check's bound of 0) is past any bound.
        return max((_inf_if_nan(c.used) for c in failing), default=None)
    used = [c.max_abs / c.bound for s in subjects for c in s.comparisons if c.passed and c.bound > 0]
    return max(used, default=None)


def _inf_if_nan(x: float) -> float:
    return math.inf if math.isnan(x) else x
