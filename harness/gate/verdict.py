"""An upgrade's verdict: what ran on each side (harness.environments.upgrade) and the gate's rows, judged.

SAFE when nothing regressed and something was compared; NOT SAFE names each regression with its
evidence; CANNOT TELL when nothing was compared on both sides. A check that is not compared (a
kernel the interpreter cannot run on either side, a step that did not run in the baseline) is
listed with its reason and moves the verdict neither way. Pure: results in, rows and a verdict out.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict

from harness.core.exit_codes import EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_OK
from harness.environments import upgrade
from harness.gate import GateResult, Group, Row, Status

_CATEGORY = {"run": "correctness", "compile": "compile", "bench": "speed"}  # gate.CATEGORIES


def _not_run(rs: list[upgrade.StepResult]) -> str:
    r = next(x for x in rs if not x.ran)
    return f"the {r.side}'s {r.step.label} did not run (exit {r.code}): {r.last_line()}; log {r.log}"


def step_rows(results: list[upgrade.StepResult]) -> tuple[list[Row], set[str]]:
    """A gate row for each check that did not run on a side, and the run ids the gate must leave out.

    Did not run in the candidate only: a regression, with its exit code, error and log. Did not run
    in the baseline: not compared (there is nothing to compare with). Either way both sides' runs
    of that check are left out of the comparison, so that one cause is one finding.
    """
    by_key: dict[tuple[str, str | None], dict[str, list[upgrade.StepResult]]] = {}
    for r in results:
        by_key.setdefault(r.step.key, {}).setdefault(r.side, []).append(r)
    rows, drop = [], set()
    for (name, kernel), sides in by_key.items():
        b, c = sides.get("baseline", []), sides.get("candidate", [])
        b_bad, c_bad = any(not r.ran for r in b), any(not r.ran for r in c)
        if not (b_bad or c_bad):
            continue
        drop |= {run for rs in (b, c) for r in rs for run in r.runs}
        row = functools.partial(
            Row,
            category=_CATEGORY.get(name, "records"),
            subject=kernel or f"{name} step",
            baseline="did not run" if b_bad else "ran",
            candidate="did not run" if c_bad else "ran",
            detail="; ".join(_not_run(rs) for rs, bad in ((b, b_bad), (c, c_bad)) if bad),
        )
        if c_bad and not b_bad:
            rows.append(row(status=Status.WORSE, change=f"{name}: lost in the candidate", fails=True))
        else:
            where = "on either side" if c_bad else "in the baseline"
            rows.append(row(status=Status.NOT_COMPARED, change=f"{name}: did not run {where}"))
    return rows, drop


def registration_rows(base_kernels: list[str], cand_kernels: list[str], wanted: list[str]) -> list[Row]:
    """A kernel registered in the baseline and not in the candidate is lost (one only in the candidate
    runs there, and the gate counts it as new)."""
    return [
        Row(
            category="correctness",
            subject=k,
            status=Status.WORSE,
            baseline="registered",
            candidate="not registered",
            change="lost: not registered in the candidate",
            detail="harness.core.contract registers it in the baseline environment only: its framework "
            "no longer imports there (python -c 'from harness.core import contract; print(contract.names())')",
            fails=True,
        )
        for k in wanted
        if k in base_kernels and k not in cand_kernels
    ]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    safe: bool
    code: int  # the exit code: 0 safe, 1 not safe, 4 nothing could be compared here
    headline: str  # the first line of the output, and the report's verdict
    groups: dict[Group, tuple[str, ...]]  # group -> one line per finding (within noise: counts)

    @property
    def reasons(self) -> tuple[str, ...]:
        """What fails, and why: the regressions with their evidence."""
        return self.groups[Group.REGRESSIONS]

    def lines(self) -> list[str]:
        """The headline, then each non-empty group: regressions as `  - ...` lines (CI's job summary greps them)."""
        out = [self.headline]
        for g, items in self.groups.items():
            if not items:
                continue
            if g == Group.REGRESSIONS:
                out += [f"  - {x}" for x in items]
            else:
                out.append(f"  {g}:")
                out += [f"      {x}" for x in items]
        return out


def _line(r: Row, *, detail: bool) -> str:
    return f"{r.category}: {r.subject}: {r.change}" + (f": {r.detail}" if detail and r.detail else "")


def verdict(*, change: str, result: GateResult) -> Verdict:
    """SAFE when nothing regressed and something was compared; NOT SAFE names each regression and its evidence.

    A check that is not compared (a kernel the interpreter cannot run on either side, a step that
    did not run in the baseline) is listed with its reason and moves the verdict neither way.
    """
    groups = result.groups()
    noise = defaultdict(int)
    for r in groups[Group.WITHIN_NOISE]:
        noise[r.category] += 1
    lines = {
        Group.REGRESSIONS: tuple(_line(r, detail=True) for r in groups[Group.REGRESSIONS]),
        Group.IMPROVEMENTS: tuple(_line(r, detail=False) for r in groups[Group.IMPROVEMENTS]),
        Group.NEW: tuple(_line(r, detail=False) for r in groups[Group.NEW]),
        Group.NOT_COMPARED: tuple(_line(r, detail=True) for r in groups[Group.NOT_COMPARED]),
        Group.WITHIN_NOISE: (", ".join(f"{c} {n}" for c, n in noise.items()),) if noise else (),
    }
    counts = result.counts()
    bad = groups[Group.REGRESSIONS]
    if bad:
        by_cat = defaultdict(int)
        for r in bad:
            by_cat[r.category] += 1
        what = ", ".join(f"{c} {n}" for c, n in by_cat.items())
        n = len(bad)
        headline = f"NOT SAFE: {change} ({n} regression{'s' if n != 1 else ''}: {what}; {counts})"
        return Verdict(safe=False, code=EXIT_FAIL, headline=headline, groups=lines)
    compared = any(groups[g] for g in (Group.IMPROVEMENTS, Group.NEW, Group.WITHIN_NOISE))
    if not compared:
        headline = f"CANNOT TELL: {change} (nothing was compared on both sides; {counts})"
        return Verdict(safe=False, code=EXIT_CANNOT_RUN, headline=headline, groups=lines)
    return Verdict(safe=True, code=EXIT_OK, headline=f"SAFE: {change} (no regression; {counts})", groups=lines)
