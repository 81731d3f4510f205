"""A results store's coverage per matrix cell: each implementation's verdict in each cell, how much of its
declared API the cell's cases exercised, and the checks beyond the truth each kernel's cases ran (`harness
coverage` and the report), from records alone."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from harness.core.case import Case
from harness.core.coverage import CHECKS, case_checks, declaring_name
from harness.core.summary import KernelSummary
from harness.store.records import CaseRecord, RunRecord
from harness.store.schema import KernelStatus, RunStatus


def cell_name(run: RunRecord | dict[str, Any] | None) -> str:
    """A run's matrix cell as harness.environments.matrix names it (py3.11-jax0.10.2-torch2.13.0), from its versions
    (a run record, or its run.json)."""
    versions = (run.get("versions") if isinstance(run, dict) else run.versions if run is not None else None) or {}
    if not versions.get("jax"):
        return "unknown"
    python = ".".join(str(versions.get("python") or "?").split(".")[:2])
    # A local version label ("2.13.0+cpu") is the build, not the release the matrix pins.
    torch = str(versions.get("torch") or "none").split("+")[0]
    return f"py{python}-jax{versions['jax']}-torch{torch}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellRow:
    """One implementation in one matrix cell: its verdict and how much of its declared API the cell's
    cases exercised. absent / undeclared: "API.param" names the cell's library lacks / has undeclared."""

    cell: str
    implementation: str
    verdict: str
    cases: int
    exercised: int
    drawn: int
    absent: tuple[str, ...] = ()
    undeclared: tuple[str, ...] = ()
    same_cases_as: str | None = None  # an earlier cell that ran exactly the same cases


def _verdict(records: list[CaseRecord], summaries: list[KernelSummary], runs: list[RunRecord]) -> str:
    statuses = {s.status for s in summaries}
    if any(not r.passed for r in records):
        return KernelStatus.ORACLE_FINDING if all(r.role == "oracle" for r in records) else KernelStatus.FAIL
    for status in (KernelStatus.FAIL, KernelStatus.FLAKY_FAIL, KernelStatus.CANNOT_RUN, KernelStatus.INTERRUPTED):
        if status in statuses:
            return status
    if any(run.status not in (RunStatus.FINISHED, RunStatus.CANNOT_RUN) for run in runs):
        return "incomplete"
    return KernelStatus.PASS if records else "no cases"


def _natural(text: str) -> tuple[Any, ...]:
    """A sort key that orders version numbers by value: jax0.9.2 before jax0.10.2."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def cell_rows(runs: dict[str, RunRecord], cases: list[CaseRecord]) -> list[CellRow]:
    """One row per (cell, implementation) that a run's summary or a case record names, cells in version
    order, then implementations: a kernel that cannot run in a cell has a row with no cases.

    From records alone (runs: run_id -> its run record; cases: case records, harness.store.records): the
    drawn parameters are those run.json's api_parameters declares drawn and present, the exercised ones
    those the case records list.
    """
    records: dict[tuple[str, str], list[CaseRecord]] = {}
    run_ids: dict[tuple[str, str], set[str]] = {}
    for rec in cases:
        key = (cell_name(runs.get(rec.run_id)), rec.implementation)
        records.setdefault(key, []).append(rec)
        run_ids.setdefault(key, set()).add(rec.run_id)
    for run_id, run in runs.items():
        for row in run.summary:  # a bench or compile run's rows name no kernel
            run_ids.setdefault((cell_name(run), row.name), set()).add(run_id)
    first_seen: dict[tuple[str, tuple[str, ...]], str] = {}
    out = []
    for (cell, name), ids_of_runs in sorted(run_ids.items(), key=lambda kv: (_natural(kv[0][0]), kv[0][1])):
        recs = records.get((cell, name), [])
        mine = [runs[i] for i in sorted(ids_of_runs) if i in runs]
        summaries = [s for run in mine for s in run.summary if s.name == name]
        presence: dict[str, dict[str, Any]] = {}
        for run in mine:
            presence.update(((run.api_parameters or {}).get(declaring_name(name))) or {})
        drawn = {
            f"{api}.{p}" for api, info in presence.items() for p in info.get("drawn", ()) if p not in info["absent"]
        }
        done = {p for r in recs for p in r.exercised or ()}
        ids = tuple(sorted({r.case_id for r in recs}))
        same = first_seen.setdefault((name, ids), cell) if ids else cell
        out.append(
            CellRow(
                cell=cell,
                implementation=name,
                verdict=_verdict(recs, summaries, mine),
                cases=len(ids),
                exercised=len(done & drawn),
                drawn=len(drawn),
                absent=tuple(f"{a}.{n}" for a, info in sorted(presence.items()) for n in info.get("absent", ())),
                undeclared=tuple(
                    f"{a}.{n}" for a, info in sorted(presence.items()) for n in info.get("undeclared", ())
                ),
                same_cases_as=None if same == cell else same,
            )
        )
    return out


def check_counts(records: Iterable[CaseRecord]) -> dict[str, dict[str, int]]:
    """Per kernel: its distinct cases ("cases") and how many of them each of CHECKS ran on. A record
    from before CaseRecord.checks counts only the checks its case makes by itself (case_checks)."""
    seen: dict[str, dict[str, set[str]]] = {}
    for rec in records:
        if rec.role == "oracle" or rec.case is None:
            continue
        ran = set(rec.checks or ()) | set(case_checks(Case.from_json(rec.case)))
        per = seen.setdefault(rec.implementation, {"cases": set()} | {c: set() for c in CHECKS})
        per["cases"].add(rec.case_id)
        for check in ran & set(CHECKS):
            per[check].add(rec.case_id)
    return {name: {key: len(ids) for key, ids in per.items()} for name, per in sorted(seen.items())}
