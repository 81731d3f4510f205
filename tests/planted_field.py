"""Fields added to the failure value (harness.store.bug.Bug), for tests/test_failure_value.py: `plant()` (called
ahead of `python -m harness`, or by pytest as a `-p` plugin) adds two, no view told of either, each declared as a
real one is:

  planted       a labelled field of the value (TEXT, its default: as a field the failure file already holds)
  planted_fact  a fact the search computes (FACT): declared with its JSON type in Found and labelled in Bug (what
                harness/store/bug.py would hold), its value given where settle computes the search's facts
                (harness.running.settle.Settle._found): it reaches every view through the failure file's search
                section, read as strictly as a real fact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from harness.running import settle
from harness.store import bug

TEXT = "the planted field says 7f3a"  # nothing HTML escapes
FACT = "the planted search fact says 9c1e"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlantedFound(bug.Found):
    planted_fact: str | None = bug.fact(lambda v: isinstance(v, str), "a string")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlantedBug(bug.Bug):
    planted: str = dataclasses.field(default=TEXT, metadata=bug.shown("planted field"))
    planted_fact: str | None = dataclasses.field(
        default=None, metadata=bug.shown("planted search fact") | bug.searched("planted_fact")
    )


def plant(replace: Callable[[object, str, object], None] = setattr) -> None:
    """Every Bug read from a failure file from now on is a PlantedBug, its search read as a PlantedFound; every
    search settled from now on records FACT. replace: how each attribute is replaced (a test passes
    monkeypatch.setattr, which puts them back after it)."""
    of = bug.Bug.of.__func__  # type: ignore[attr-defined]
    replace(bug.Bug, "of", classmethod(lambda cls, record, path: of(PlantedBug, record, path)))
    replace(bug, "Found", PlantedFound)
    computed = settle.Settle._found

    def found(self: settle.Settle, *args: Any, **kw: Any) -> tuple[bug.Found, str | None]:
        facts, words = computed(self, *args, **kw)
        as_fields = {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}
        return PlantedFound(**as_fields, planted_fact=FACT), words

    replace(settle.Settle, "_found", found)


def pytest_configure(config: object) -> None:
    plant()
