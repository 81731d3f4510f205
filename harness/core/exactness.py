"""Which quantities a kernel keeps to the bit, from the installed upstream kernel's own behaviour.

A kernel declares, per quantity, whether a rerun and a batch row alone return the same bits
(harness.core.contract.Conventions: reproducible, batch_invariant, and the quantities a reason is about).
A declaration written once goes stale both ways: a reason that covers more than upstream varies lets a
fork move every quantity it covers by an ulp, and one that claims the same bits where upstream varies
fails every case. The exactness probe (harness.running.exactness) measures the upstream kernel on a few
fixed cases; `refine` turns its measurement into the conventions a run checks, for the kernel and for
every drop-in tested against its adapter: a quantity upstream keeps bitwise is checked bitwise (the
declaration tightened), and a measured variance the declaration does not allow is reported, never
silently allowed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.core.contract import EXACT_CHECKS, QUANTITIES, Conventions

# How each check reads in the record's sentence.
LABELS = {"reproducible": "rerun", "batch_invariant": "row alone"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measured:
    """What the probe measured on one upstream kernel.

    diffs: per check (EXACT_CHECKS), per quantity it measured, the largest difference seen on any probe
      case (0.0: the same bits on every case). A quantity the kernel did not return is absent.
    error: why the probe measured nothing (the kernel refused or lost its probe case); diffs then empty.
    """

    kernel: str  # the upstream adapter measured
    where: str  # the release and interpreter it ran on, in words
    cases: int = 0
    diffs: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0  # CPU seconds the probe took (its worker's)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measured:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ValueError(f"Measured has no fields {unknown}")
        diffs = {c: {q: float(d) for q, d in per.items()} for c, per in data.get("diffs", {}).items()}
        return cls(**{**data, "diffs": diffs})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Refined:
    """The conventions a run checks, and each declared 'same bits' the probe contradicts, in words."""

    conventions: Conventions
    contradictions: tuple[str, ...] = ()


def _ordered(names: set[str]) -> tuple[str, ...]:
    return tuple(q for q in QUANTITIES if q in names)


def _listed(diffs: dict[str, float], names: tuple[str, ...]) -> str:
    return ", ".join(f"{q} ({diffs[q]:.2g})" if diffs[q] else q for q in names)


def _refine_check(declared: Conventions, check: str, diffs: dict[str, float]) -> tuple[dict[str, Any], str, str]:
    """The fields of `check` refined by `diffs`, the sentence saying so, and a contradiction ('' if none)."""
    allowed = set(declared.varies(check))
    exact = {q for q, d in diffs.items() if d == 0.0}
    varying = set(diffs) - exact
    tightened = _ordered(allowed & exact)
    still = allowed - exact
    reason = getattr(declared, check)
    fields = {check: reason if still else True, EXACT_CHECKS[check]: _ordered(still) if still else ()}
    label = LABELS[check]
    said = [f"{label}: same bits in {_listed(diffs, _ordered(exact)) or 'nothing'}"]
    if varying:
        said.append(f"differs in {_listed(diffs, _ordered(varying))}")
    if tightened:
        said.append(f"checked bitwise here though declared to vary: {', '.join(tightened)}")
    contradicted = _ordered(varying - allowed)
    contradiction = ""
    if contradicted:
        contradiction = (
            f"{label}: declared the same bits, but upstream differs in {_listed(diffs, contradicted)}: "
            "still checked bitwise; correct the declaration if upstream is right"
        )
    return fields, "; ".join(said), contradiction


def refine(declared: Conventions, measured: Measured) -> Refined:
    """`declared` tightened to what `measured` found the same bits, and what it contradicts.

    A quantity declared to vary that the probe found the same bits on every case is checked bitwise;
    one declared the same bits that the probe found to vary stays bitwise (upstream itself then fails
    the check: its declaration is wrong) and is named in `contradictions`. Quantities the probe did not
    measure keep their declaration."""
    if measured.error is not None:
        note = f"exactness probe of {measured.kernel} ({measured.where}) measured nothing: {measured.error}"
        return Refined(conventions=dataclasses.replace(declared, probed=note))
    fields: dict[str, Any] = {}
    said, contradictions = [], []
    for check in EXACT_CHECKS:
        got, sentence, contradiction = _refine_check(declared, check, measured.diffs.get(check, {}))
        fields |= got
        said.append(sentence)
        if contradiction:
            contradictions.append(contradiction)
    head = f"exactness probe of {measured.kernel} ({measured.where}, {measured.cases} cases)"
    probed = f"{head}: {'. '.join(said + contradictions)}."
    return Refined(
        conventions=dataclasses.replace(declared, **fields, probed=probed), contradictions=tuple(contradictions)
    )
