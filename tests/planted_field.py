"""A field added to the failure value (harness.store.bug.Bug), for tests/test_failure_value.py: `plant()` (called
ahead of `python -m harness`, or by pytest as a `-p` plugin) makes every Bug built from a failure file carry one more
labelled field, with no view told of it."""

from __future__ import annotations

import dataclasses

from harness.store import bug

TEXT = "the planted field says 7f3a"  # nothing HTML escapes


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlantedBug(bug.Bug):
    planted: str = dataclasses.field(default=TEXT, metadata=bug.shown("planted field"))


def plant() -> None:
    """Every Bug read from a failure file from now on is a PlantedBug."""
    of = bug.Bug.of.__func__  # type: ignore[attr-defined]
    bug.Bug.of = classmethod(lambda cls, record, path: of(PlantedBug, record, path))  # type: ignore[method-assign]


def pytest_configure(config: object) -> None:
    plant()
