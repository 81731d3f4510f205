"""The conventions table: what each implementation does natively, and where that was read from.

Conventions are declared in code (harness.core.contract.Conventions on each Implementation).
A run.json may carry them under "conventions" ({implementation: Conventions.to_json()});
when it does not, they are read from this installation's registry at report time, for
the implementations that appear in the records only, and the report says so.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from harness.store.read import Records


@dataclasses.dataclass(kw_only=True)
class ConventionRow:
    implementation: str
    role: str
    bias: str
    causal: str
    gqa: str
    empty_rows: str  # declared
    observed: str  # the empty_rows values the records carry
    notes: str
    source: str
    # What is declared the same bits (Conventions.reproducible, batch_invariant): "rerun", "row alone",
    # both, or "-"; a reason it is not joins the notes (issue 28).
    bitwise: str = "?"


def _from_registry(name: str) -> dict[str, Any] | None:
    from harness.core import contract  # imports every kernel and oracle: only when a run did not record them

    try:
        return contract.resolve(name).conventions.to_json()
    except (contract.UnknownImplementation, ImportError, AttributeError):
        return None


_BITWISE = {"reproducible": "rerun", "batch_invariant": "row alone"}


def _bitwise(conv: dict[str, Any]) -> str:
    if not any(name in conv for name in _BITWISE):
        return "?"  # declared before the fields existed
    return ", ".join(label for name, label in _BITWISE.items() if conv.get(name) is True) or "-"


def _not_bitwise(conv: dict[str, Any]) -> list[str]:
    """Each reason a check is not bitwise, with the quantities it is about; then what the exactness probe found."""
    varies = {"reproducible": "rerun_varies", "batch_invariant": "batch_varies"}
    said = [
        f"Not bitwise ({label}{': ' + ', '.join(conv[varies[name]]) if conv.get(varies[name]) else ''}): {conv[name]}."
        for name, label in _BITWISE.items()
        if conv.get(name, True) is not True
    ]
    return said + ([str(conv["probed"])] if conv.get("probed") else [])


def collect(records: Records) -> tuple[list[ConventionRow], str]:
    """One row per implementation in the case records, and a sentence saying where the rows came from."""
    roles: dict[str, str] = {}
    observed: dict[str, set[str]] = defaultdict(set)
    for rec in records.cases:
        name = rec.implementation
        roles.setdefault(name, str(rec.role))
        if rec.empty_rows:
            observed[name].add(str(rec.empty_rows))
    recorded: dict[str, dict[str, Any]] = {}
    for run in records.runs.values():
        for name, conv in (run.conventions or {}).items():
            if isinstance(conv, dict):
                recorded[name] = conv
    rows, sources = [], set()
    for name in sorted(roles, key=lambda n: (roles[n] != "kernel", n)):
        conv, source = recorded.get(name), "recorded in run.json"
        if conv is None:
            conv, source = _from_registry(name), "registry at report time"
        if conv is None:
            conv, source = {}, "unknown: not recorded, not in this installation's registry"
        sources.add(source)
        rows.append(
            ConventionRow(
                implementation=name,
                role=roles[name],
                bias=str(conv.get("bias", "?")),
                causal=str(conv.get("causal", "?")),
                gqa=str(conv.get("gqa", "?")),
                empty_rows=str(conv.get("empty_rows", "?")),
                observed=", ".join(sorted(observed[name])) or "-",
                notes=" ".join([str(conv.get("notes", "")), *_not_bitwise(conv)]).strip(),
                source=source,
                bitwise=_bitwise(conv),
            )
        )
    if sources == {"recorded in run.json"}:
        text = "Read from the runs' run.json, as each implementation declared them when it ran."
    elif not rows:
        text = "No case records, so no implementation to describe."
    else:
        text = (
            "The runs did not record their conventions, so these were read from this installation's registry "
            "(harness.core.contract) when the report was rendered, for the implementations in the records. "
            "The 'seen in records' column is what the records themselves carry."
        )
    return rows, text
