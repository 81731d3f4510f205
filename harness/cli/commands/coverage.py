"""`coverage`: per implementation, every parameter of the API it wraps, the values drawn, and how many
stored cases exercised it; then per matrix cell and implementation, the verdict and that coverage.

Runs nothing. Exit 0 when every drawn parameter of every implementation with cases in the store was
exercised by at least one of them; 1 when one was not (a gap, listed); 2 for a store that cannot be read.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from pathlib import Path
from typing import Any

from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.cli.commands._shared import add_store, stores
from harness.cli.commands.run import RULER
from harness.core import contract, coverage
from harness.core.case import Case, CaseError
from harness.store import cells as store_cells
from harness.store import read as store_read
from harness.store.records import CaseRecord

NAME = "coverage"
HELP = "per implementation: each parameter of the wrapped API, the values drawn, and the stored cases exercising it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_store(p)
    p.add_argument(
        "--implementation",
        action="append",
        metavar="NAME",
        help="only these implementations (repeatable; default every one registered here or in the store)",
    )


def _parse(rec: CaseRecord) -> Case:
    try:
        return Case.from_json(rec.case)
    except CaseError as e:
        raise UsageError(f"case record {rec.case_id!r} of run {rec.run_id!r}: bad case: {e}") from None


def _load(stores: list[Path]) -> store_read.Records:
    try:
        recs = store_read.load(stores)
    except store_read.SpecError as e:
        raise UsageError(f"{e}; give --store DIR, a store written by `python -m harness run --out DIR`") from None
    if recs.problems:
        more = f" (and {len(recs.problems) - 1} more)" if len(recs.problems) > 1 else ""
        raise UsageError(f"{recs.problems[0]}{more}; repair or remove the file")
    return recs


@functools.cache
def _declared(name: str) -> contract.Implementation | None:
    """The implementation a recorded name stands for: a built-in, or a MODULE:ATTR (a drop-in function
    wraps its built-in's API; an Implementation object declares its own), None when it cannot load here."""
    try:
        return contract.resolve(name)
    except Exception:  # noqa: BLE001 - a module that fails to import here: its records are still counted
        return None


def _with_drawn(api_parameters: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
    """run.json's api_parameters with "drawn" filled from the declarations here where a run recorded
    them before run.json listed them."""
    if not api_parameters:
        return api_parameters
    out = {}
    for name, apis in api_parameters.items():
        impl = _declared(name)
        apis = {api: dict(info) for api, info in apis.items()}
        for api in impl.api if impl is not None else ():
            if api.name in apis and "drawn" not in apis[api.name]:
                apis[api.name]["drawn"] = [p.name for p in api.params if p.is_drawn]
        out[name] = apis
    return out


def parameter_table(name: str, rows: list[coverage.Row], *, cases: int) -> str:
    """One implementation's declared parameters, the values drawn, and the cases that exercised each."""
    head = f"== {name}: {cases} case{'s' * (cases != 1)} in the store"
    if not rows:
        return f"{head}\n  no API declared"
    width = max(len(r.param) for r in rows) + 2
    lines = [head, f"  {'parameter':<{width}} {'cases':>6}  values drawn (or why not)"]
    api = None
    for r in rows:
        if r.api != api:
            api = r.api
            lines.append(f"  {api}")
        count = "-" if r.cases is None else str(r.cases)
        what = r.drawn + (f" ({r.why})" if r.why else "") if r.cases is not None else f"not drawn: {r.why}"
        gap = "  << drawn, never exercised" if r.cases == 0 and cases else ""
        lines.append(f"    {r.param:<{width - 2}} {count:>6}  {what}{gap}")
    return "\n".join(lines)


def cell_table(rows: list[store_cells.CellRow]) -> str:
    """Per matrix cell and implementation: verdict, cases, drawn parameters exercised, and what differs."""
    if not rows:
        return "no runs in the store"
    cw = max(len("cell"), *(len(r.cell) for r in rows))
    iw = max(len("implementation"), *(len(r.implementation) for r in rows))
    lines = [f"{'cell':<{cw}}  {'implementation':<{iw}}  {'verdict':<16} {'cases':>5}  exercised  notes"]
    for r in rows:
        notes = []
        if r.same_cases_as:
            notes.append(f"same cases as {r.same_cases_as}")
        if r.absent:
            notes.append(f"absent here: {', '.join(r.absent)}")
        if r.undeclared:
            notes.append(f"UNDECLARED here: {', '.join(r.undeclared)}")
        share = f"{r.exercised}/{r.drawn}"
        lines.append(
            f"{r.cell:<{cw}}  {r.implementation:<{iw}}  {r.verdict:<16} {r.cases:>5}  {share:>9}  {'; '.join(notes)}"
        )
    return "\n".join(lines)


def check_table(counts: dict[str, dict[str, int]]) -> str:
    """Per kernel, the cases each check beyond the truth ran on (harness.store.cells.check_counts)."""
    lines = ["== checks beyond the truth: cases each ran on, per kernel"]
    for name, per in counts.items():
        ran = ", ".join(f"{c} {per[c]}" for c in coverage.CHECKS)
        lines.append(f"  {name}: {per['cases']} cases; {ran}")
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    recs = _load(stores(args))
    registered = contract.registry()
    wanted = args.implementation
    if wanted:
        unknown = sorted(n for n in wanted if _declared(n) is None)
        if unknown:
            raise UsageError(f"--implementation {unknown} cannot be loaded here; built-ins: {sorted(registered)}")
    cases_of: dict[str, dict[str, Case]] = {}
    for rec in recs.cases:
        cases_of.setdefault(rec.implementation, {}).setdefault(rec.case_id, _parse(rec))
    every = {case_id: case for cases in cases_of.values() for case_id, case in cases.items()}
    names = sorted(set(wanted or registered) | (set(cases_of) if not wanted else set()))
    gaps = []
    for name in names:
        impl = _declared(name)
        # The ruler computes the truth of every case, and is never a recorded subject.
        stored = list(every.values()) if name == RULER else list(cases_of.get(name, {}).values())
        if impl is None:
            print(f"== {name}: {len(stored)} cases in the store; it does not load here, so no declarations to read\n")
            continue
        rows = coverage.rows(impl, stored)
        print(parameter_table(name, rows, cases=len(stored)) + "\n")
        if stored:
            gaps += [f"{name}: {r.api} {r.param}" for r in rows if r.cases == 0]
    cases = []
    for rec in recs.cases:
        if rec.exercised is None:  # written before records listed it: counted from the declarations here
            impl = _declared(rec.implementation)
            case = cases_of[rec.implementation][rec.case_id]
            rec = dataclasses.replace(rec, exercised=[] if impl is None else coverage.exercised(impl, case))
        cases.append(rec)
    runs = {
        run_id: dataclasses.replace(run, api_parameters=_with_drawn(run.api_parameters))
        for run_id, run in recs.runs.items()
    }
    print(check_table(store_cells.check_counts(r for r in recs.cases if not wanted or r.implementation in wanted)))
    cells = store_cells.cell_rows(runs, cases)
    if wanted:
        cells = [c for c in cells if c.implementation in wanted]
    print("== per cell: the verdict, and the drawn parameters its cases exercised")
    print(cell_table(cells))
    if gaps:
        print(f"\n{len(gaps)} drawn parameter{'s' * (len(gaps) != 1)} exercised by no stored case:")
        print("\n".join(f"  {g}" for g in gaps))
        return EXIT_FAIL
    return EXIT_OK
