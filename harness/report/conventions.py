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
    # Conventions.reproducible / batch_invariant: "bitwise", or the declared reason (issue 28).
    reproducible: str = "?"
    batch_invariant: str = "?"


def _from_registry(name: str) -> dict[str, Any] | None:
    from harness.core import contract  # imports every kernel and oracle: only when a run did not record them

    try:
        return contract.resolve(name).conventions.to_json()
    except (contract.UnknownImplementation, ImportError, AttributeError):
        return None


def _bitwise(conv: dict[str, Any], name: str) -> str:
    value = conv.get(name, "?")
    return "bitwise" if value is True else str(value)


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
                notes=str(conv.get("notes", "")),
                source=source,
                reproducible=_bitwise(conv, "reproducible"),
                batch_invariant=_bitwise(conv, "batch_invariant"),
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
