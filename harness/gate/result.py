"""What the gate decided: every row, the paired cases' drift and the changed kernel code, and the summary line."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from harness.gate import drift
from harness.gate.codegen import CodegenChange
from harness.gate.rows import CATEGORIES, GROUPS, Group, Row


@dataclasses.dataclass(kw_only=True)
class GateResult:
    baseline: str
    candidate: str
    thresholds: str
    rows: list[Row]
    # Every case run on both sides, compared side by side (harness.gate.drift), largest growth first.
    drift: list[drift.CaseDrift] = dataclasses.field(default_factory=list)
    # Every compile whose Mosaic kernel bodies changed, with both sides' bodies (the report's diffs).
    codegen: list[CodegenChange] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.fails for r in self.rows)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.fails]

    def largest_drifts(self, n: int = 20) -> list[drift.CaseDrift]:
        """The `n` paired cases whose error grew most (for the report's drift section)."""
        return drift.largest(self.drift, n)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    def groups(self) -> dict[Group, list[Row]]:
        """Every row in its group (GROUPS order; an empty group is there, empty)."""
        out: dict[Group, list[Row]] = {g: [] for g in GROUPS}
        for r in self.rows:
            out[r.group].append(r)
        return out

    def counts(self) -> str:
        """ "1 improvement, 0 new, 2 not compared, 40 within noise": the groups that are not regressions."""
        groups = self.groups()
        n = len(groups[Group.IMPROVEMENTS])
        parts = [f"{n} improvement{'s' if n != 1 else ''}"]
        parts += [f"{len(groups[g])} {g}" for g in (Group.NEW, Group.NOT_COMPARED, Group.WITHIN_NOISE)]
        return ", ".join(parts)

    def summary(self) -> str:
        if not self.rows:
            return "NOTHING COMPARED: neither side has case, bench or compile records"
        if not self.failed:
            return f"GATE PASSED: no regression ({self.counts()})"
        by_cat = defaultdict(int)
        for r in self.failures:
            by_cat[r.category] += 1
        parts = ", ".join(f"{c} {by_cat[c]}" for c in CATEGORIES if by_cat[c])
        n = len(self.failures)
        return f"GATE FAILED: {n} regression{'s' if n != 1 else ''} ({parts})"
