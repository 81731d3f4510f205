"""Paired numerics drift: the same case, run on both sides of an upgrade, compared side by side.

Both sides of an upgrade draw the same derandomized cases, so every (implementation,
case id) found on both sides is a pair. For each pair, per quantity: the error against the
float64 truth before and after, and each as a share of its bound. A pair whose error grew
by more than `[drift] factor` of harness/gate/gate_thresholds.toml fails the gate even when both
sides pass their tolerance: a silent numerics change in a release is a finding.

"identical" means the implementation returned the same bits on both sides: the records'
`digest` (harness.running.runner.outputs_digest) is equal. Each side recomputes the float64 truth with
its own jax, so equal outputs can still show different errors; the digest is what tells. For
records written before digests, identical falls back to every error figure (max_abs, max_rel)
being the same to the bit.

Pure: records in, `CaseDrift`s out. `replay_document` turns a drifted pair into a failure-file
document (harness.running.failures) so that `python -m harness repro FILE` replays the case in
either environment; `write_replays` writes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.core.case import Case, CaseError
from harness.store.failures import FailureRecord
from harness.store.files import atomic_write_json
from harness.store.records import CaseRecord, RunRecord

REPLAY_DIR = "drift"


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuantityDrift:
    """One quantity of one paired case: the error before and after, and the bounds they were held to."""

    quantity: str
    before: float  # max_abs against the truth, baseline side
    after: float  # ... candidate side
    bound_before: float
    bound_after: float

    @property
    def growth(self) -> float:
        """after / before: 1.0 when both are 0, inf when only the baseline was exact, nan when either is not finite."""
        if not (math.isfinite(self.before) and math.isfinite(self.after)):
            return math.nan
        if self.before == 0:
            return 1.0 if self.after == 0 else math.inf
        return self.after / self.before

    @property
    def used_before(self) -> float:
        return _share(self.before, self.bound_before)

    @property
    def used_after(self) -> float:
        return _share(self.after, self.bound_after)

    def beyond(self, factor: float, min_used: float) -> bool:
        """Grew by more than `factor`, to an error that is at least `min_used` of its bound (not rounding dust)."""
        g = self.growth
        return not math.isnan(g) and g > factor and self.used_after >= min_used

    def text(self) -> str:
        g = self.growth
        grew = "from 0" if math.isinf(g) else f"x{g:.2f}"
        return (
            f"{self.quantity} err {self.before:.3g} -> {self.after:.3g} ({grew}); "
            f"err/bound {self.used_before:.3f} -> {self.used_after:.3f}"
        )


def _share(err: float, bound: float) -> float:
    if not math.isfinite(bound) or bound <= 0:
        return math.inf if err > 0 else 0.0
    return err / bound


@dataclasses.dataclass(frozen=True, kw_only=True)
class CaseDrift:
    """One implementation on one case, run on both sides."""

    implementation: str
    case_id: str
    case: dict[str, Any]  # the case JSON (harness.core.case)
    identical: bool  # the same returned bits on both sides (digests; else every error figure)
    passed_before: bool
    passed_after: bool
    quantities: tuple[QuantityDrift, ...]
    replay: str | None = None  # the replay file, when one was written (write_replays)

    @property
    def worst(self) -> QuantityDrift | None:
        """The quantity whose error grew most (nan growths last)."""
        ranked = [q for q in self.quantities if not math.isnan(q.growth)]
        return max(ranked, key=lambda q: q.growth, default=None)

    @property
    def growth(self) -> float:
        w = self.worst
        return w.growth if w is not None else math.nan

    def beyond(self, factor: float, min_used: float) -> list[QuantityDrift]:
        """The quantities that drifted beyond the limit, on a case that passes on both sides.

        A case failing on either side is the gate's correctness finding (a new failure, or one
        in both); counting it again as drift would report one finding twice.
        """
        if not (self.passed_before and self.passed_after):
            return []
        return [q for q in self.quantities if q.beyond(factor, min_used)]

    @property
    def replay_command(self) -> str | None:
        """`python -m harness repro FILE`, to run in each environment; None when no replay file was written."""
        return None if self.replay is None else shlex.join(["python", "-m", "harness", "repro", self.replay])

    @property
    def replay_name(self) -> str | None:
        """The replay file's name (its directory is `<out>/candidate/drift/`), None when none was written."""
        return None if self.replay is None else Path(self.replay).name

    @property
    def case_text(self) -> str:
        try:
            return str(Case.from_json(self.case))
        except (CaseError, TypeError, ValueError):
            return str(self.case)

    @property
    def case_parts(self) -> tuple[str, str]:
        """(the case without its block sizes, the block sizes or ""): the report folds the long second part away."""
        head, _, blocks = self.case_text.partition(" blocks=")
        return head, blocks

    @property
    def replay_id(self) -> str:
        return f"drift-{self.case_id}-{hashlib.sha256(self.implementation.encode()).hexdigest()[:6]}"


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _figures(recs: list[CaseRecord]) -> list[tuple]:
    return sorted(
        # The implementation's own error figures; the ruler's error and the bound belong to the
        # same-dtype oracle, which an upgrade of jax moves even when this implementation did not.
        (str(c.quantity), _num(c.max_abs), _num(c.max_rel))
        for r in recs
        for c in r.comparisons
    )


def _identical(base: list[CaseRecord], cand: list[CaseRecord]) -> bool:
    digests = [r.digest for r in (*base, *cand)]
    if all(digests):
        return len(set(digests)) == 1
    return _same(_figures(base), _figures(cand))


def _same(a: list[tuple], b: list[tuple]) -> bool:
    # nan != nan, so compare through repr: the same figure, to the bit, prints the same.
    return len(a) == len(b) and all(repr(x) == repr(y) for x, y in zip(a, b, strict=True))


def _worst_by_quantity(recs: list[CaseRecord]) -> dict[str, tuple[float, float]]:
    """quantity -> (max_abs, bound) of the worst record of this side (a case recorded twice keeps its worst)."""
    out: dict[str, tuple[float, float]] = {}
    for r in recs:
        for c in r.comparisons:
            q, err, bound = str(c.quantity), _num(c.max_abs), _num(c.bound)
            if q not in out or not err <= out[q][0]:
                out[q] = (err, bound)
    return out


def _by_pair(cases: list[CaseRecord]) -> dict[tuple[str, str], list[CaseRecord]]:
    out: dict[tuple[str, str], list[CaseRecord]] = defaultdict(list)
    for rec in cases:
        out[(rec.implementation, rec.case_id)].append(rec)
    return out


def pair(base_cases: list[CaseRecord], cand_cases: list[CaseRecord]) -> list[CaseDrift]:
    """Every (implementation, case id) recorded on both sides, compared quantity by quantity.

    A record that raised (no comparisons) pairs with no quantities; the correctness rows of the
    gate judge it. Sorted by implementation, then largest growth first.
    """
    b_all, c_all = _by_pair(base_cases), _by_pair(cand_cases)
    out = []
    for key in sorted(set(b_all) & set(c_all)):
        b, c = b_all[key], c_all[key]
        bq, cq = _worst_by_quantity(b), _worst_by_quantity(c)
        quantities = tuple(
            QuantityDrift(quantity=q, before=bq[q][0], after=cq[q][0], bound_before=bq[q][1], bound_after=cq[q][1])
            for q in sorted(set(bq) & set(cq))
        )
        out.append(
            CaseDrift(
                implementation=key[0],
                case_id=key[1],
                case=c[0].case or {},
                identical=_identical(b, c),
                passed_before=all(r.passed for r in b),
                passed_after=all(r.passed for r in c),
                quantities=quantities,
            )
        )
    nan_last = lambda d: (d.implementation, math.isnan(d.growth), -d.growth if not math.isnan(d.growth) else 0)  # noqa: E731
    return sorted(out, key=nan_last)


def largest(drifts: list[CaseDrift], n: int) -> list[CaseDrift]:
    """The `n` pairs whose error grew most, over every implementation; identical pairs never."""
    moved = [d for d in drifts if not d.identical and not math.isnan(d.growth)]
    return sorted(moved, key=lambda d: -d.growth)[:n]


def with_replays(drifts: list[CaseDrift], roots: list[Path]) -> list[CaseDrift]:
    """The drifts, each with its replay file when one of `roots` holds it (roots/drift/<id>.json)."""
    out = []
    for d in drifts:
        found = next((p for r in roots if (p := Path(r) / REPLAY_DIR / f"{d.replay_id}.json").exists()), None)
        out.append(dataclasses.replace(d, replay=str(found)) if found else d)
    return out


def replay_document(
    drift: CaseDrift, *, run: RunRecord | None, grads: bool, why: str, results: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A failure file (harness.running.failures) that replays `drift`'s case against its implementation alone.

    run: the candidate's run.json (interpreter options, time limit, versions). The oracles are
    left out: the drift is the implementation's error against the float64 truth, which every
    replay computes.
    """
    return FailureRecord(
        id=drift.replay_id,
        kernel=drift.implementation,
        oracles=(),
        grads=grads,
        case=drift.case,
        interpret=(run.interpret if run is not None else None) or {},
        time_limit=run.case_timeout if run is not None else None,
        versions=run.versions if run is not None else {},
        failure=why,
        results=results,
    ).to_json()


# The report lists this many of the largest drifts; each gets a replay file.
LISTED = 20


def write_replays(
    drifts: list[CaseDrift],
    cand_cases: list[CaseRecord],
    runs: dict[str, RunRecord],
    out_dir: Path,
    *,
    factor: float,
    min_used: float,
    listed: int = LISTED,
) -> list[CaseDrift]:
    """Write OUT_DIR/drift/<id>.json for every pair beyond the limit and the `listed` largest moves.

    Returns the drifts, with `replay` set where a file was written.
    """
    recs = _by_pair(cand_cases)
    wanted = {(d.implementation, d.case_id) for d in largest(drifts, listed)}
    out = []
    for d in drifts:
        beyond = d.beyond(factor, min_used)
        if not beyond and (d.implementation, d.case_id) not in wanted:
            out.append(d)
            continue
        rec = recs[(d.implementation, d.case_id)][0]
        quantities = [c.quantity for c in rec.comparisons]
        grads = any(q.split("[")[0] in ("dq", "dk", "dv", "dbias") for q in quantities)
        moved = beyond or ([d.worst] if d.worst is not None else [])
        why = f"numerics drift ({'beyond' if beyond else 'within'} x{factor:g}): " + "; ".join(q.text() for q in moved)
        result = {
            "passed": rec.passed,
            "backend": rec.backend,
            "error": rec.error,
            "comparisons": [c.to_json() for c in rec.comparisons],
        }
        doc = replay_document(d, run=runs.get(rec.run_id), grads=grads, why=why, results={d.implementation: result})
        path = Path(out_dir) / REPLAY_DIR / f"{d.replay_id}.json"
        atomic_write_json(path, doc)
        out.append(dataclasses.replace(d, replay=str(path)))
    return out
