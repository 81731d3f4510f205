"""Choosing the sides of a baseline comparison, and making the report (with the gate's result) from them."""

from __future__ import annotations

from pathlib import Path

from harness import gate as gate_mod
from harness.gate.thresholds import Thresholds
from harness.report import conventions, data, render
from harness.store.read import Records, SpecError, select


def sides(pool: Records, baseline: str, candidate: str | None) -> tuple[Records, str, Records, str]:
    """(baseline records, label, candidate records, label) for two SPECs (see harness.store.read).

    Without a candidate SPEC the candidate is every run in `pool` that is not in the baseline.
    """
    base, base_label = select(baseline, pool)
    if candidate is not None:
        cand, cand_label = select(candidate, pool)
    else:
        rest = pool.run_ids - base.run_ids
        if not rest:
            raise SpecError(f"no candidate: every run in the stores is in the baseline {baseline!r}; pass --candidate")
        cand = pool.subset(rest)
        cand.problems = list(pool.problems)
        cand_label = f"the other {len(rest)} run{'s' if len(rest) != 1 else ''} in the stores"
    if not cand.run_ids:
        raise SpecError(f"the candidate {candidate!r} selects no runs")
    return base, base_label, cand, cand_label


def make(
    pool: Records,
    *,
    thresholds: Thresholds,
    baseline: str | None = None,
    candidate: str | None = None,
    title: str = "Attention kernel report",
) -> tuple[data.Report, gate_mod.GateResult | None]:
    """The report over `pool` (plus the baseline and candidate when they are other stores), and the gate result."""
    if baseline is None:
        if candidate is not None:
            raise SpecError("--candidate needs --baseline")
        return data.build(pool, thresholds=thresholds, conventions=conventions.collect(pool), title=title), None
    base, base_label, cand, cand_label = sides(pool, baseline, candidate)
    result = gate_mod.compare(base, cand, thresholds, labels=(base_label, cand_label))
    return of_sides(base, cand, result, pool=pool, thresholds=thresholds, title=title), result


def of_sides(
    base: Records,
    cand: Records,
    result: gate_mod.GateResult,
    *,
    pool: Records | None = None,
    thresholds: Thresholds,
    title: str,
) -> data.Report:
    """The report of a baseline and a candidate already compared (`result`), with `pool`'s other records."""
    everything = (pool or Records()).merged(base).merged(cand)
    side = {**{r: "baseline" for r in base.run_ids}, **{r: "candidate" for r in cand.run_ids}}
    return data.build(
        everything,
        current=cand,
        gate=result,
        sides=side,
        conventions=conventions.collect(everything),
        thresholds=thresholds,
        title=title,
    )


def write(report: data.Report, out: Path | str) -> Path:
    return render.write(report, out)
