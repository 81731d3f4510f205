"""A fork gated against the kernel it replaces: its records paired with the built-in's as if one kernel.

A drop-in is named as `run --kernel` names it: `KERNEL=MODULE:ATTR` replaces KERNEL, a bare
`MODULE:ATTR` the default kernel (harness.core.contract.resolve). Where one side holds the
built-in's records and the other the drop-in's but not the built-in's, the drop-in's records are
read under the built-in's name, so that every row family (correctness, drift, compile,
memory, code generation, outline, speed) pairs them; each row then names both ("pallas_flash=mymod:fa
vs pallas_flash"). Pure: records in, records out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.core.contract import DEFAULT_DROPIN_BASE
from harness.store.read import Records


def upstream_of(name: str) -> str | None:
    """The built-in a drop-in named `name` replaces; None for a built-in (a name without MODULE:ATTR)."""
    base, eq, target = name.rpartition("=")
    if ":" not in target:
        return None
    return base if eq else DEFAULT_DROPIN_BASE


def _names(records: Records) -> set[str]:
    found = {
        r.implementation
        for group in (records.cases, records.benches, records.compiles, records.leaks)
        for r in group
        if r.implementation
    }
    for run in records.runs.values():
        found |= set(run.cannot_run or {})
    return found


def pairs(other: Records, mine: Records) -> dict[str, str]:
    """fork -> the built-in it replaces, for each drop-in in `mine` whose built-in `other` holds and `mine`
    does not (a fork as the candidate against upstream as the baseline, or the other way round)."""
    in_other, in_mine = _names(other), _names(mine)
    out = {}
    for name in sorted(in_mine):
        upstream = upstream_of(name)
        if upstream and upstream in in_other and upstream not in in_mine:
            out[name] = upstream
    return out


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """`value` (a record field) with every key, list item or string equal to a fork's name renamed."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    if isinstance(value, dict):
        return {names.get(k, k): _renamed(v, names) for k, v in value.items()}
    return value


def as_upstream(cand: Records, names: dict[str, str]) -> Records:
    """`cand` with each fork of `names` named as the built-in it replaces."""
    if not names:
        return cand

    def rename(rec: Any) -> Any:
        return dataclasses.replace(rec, implementation=names.get(rec.implementation, rec.implementation))

    runs = {
        k: dataclasses.replace(
            r,
            cannot_run=_renamed(r.cannot_run, names),
            conventions=_renamed(r.conventions, names),
            api_parameters=_renamed(r.api_parameters, names),
            more=_renamed(r.more, names),
        )
        for k, r in cand.runs.items()
    }
    return Records(
        runs=runs,
        cases=[rename(r) for r in cand.cases],
        benches=[rename(r) for r in cand.benches],
        compiles=[rename(r) for r in cand.compiles],
        leaks=[rename(r) for r in cand.leaks],
        roots=list(cand.roots),
        problems=list(cand.problems),
    )


def labelled(subject: str, names: dict[str, str]) -> str:
    """A row's subject naming the fork beside the built-in it was compared with."""
    for fork, upstream in names.items():
        if subject == upstream or subject.startswith(f"{upstream} "):
            return f"{fork} vs {upstream}{subject[len(upstream) :]}"
    return subject
