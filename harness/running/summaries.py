"""The summary rows of a run (run.json "summary"): one per kernel searched, per oracle, and per kernel
whose two Pallas interpreters were compared; each from the search's results."""

from __future__ import annotations

from typing import Any

from harness.core import contract, features
from harness.running.runner import CaseResult
from harness.running.search import SearchOutcome
from harness.store.schema import KernelStatus


def kernel_row(kernel: str, outcome: SearchOutcome, seconds: float, covered: features.Coverage) -> dict[str, Any]:
    used = [
        c.max_abs / c.bound
        for r in outcome.results
        for s in r.subjects
        if s.implementation == kernel
        for c in s.comparisons
        if c.passed and c.bound > 0
    ]
    if outcome.interrupted:
        status = KernelStatus.INTERRUPTED
    else:
        status = KernelStatus.PASS if outcome.passed else KernelStatus.FAIL
    return {
        "kernel": kernel,
        "examples": len(outcome.results),
        "failed": sum(not r.passed for r in outcome.results),
        "worst": max(used, default=None),
        "seconds": seconds,
        "status": status,
        "pairwise": covered.to_json(),
    }


def divergence_row(kernel: str, results: list[CaseResult]) -> dict[str, Any] | None:
    """The summary row of a kernel's interpreter divergences (a finding about an interpreter, reported
    apart like an oracle's: never a kernel failure), over the cases both interpreters ran; None where none did."""
    both = [s for r in results for s in r.subjects if s.implementation == kernel and s.shadow is not None]
    if not both:
        return None
    found = [s for s in both if s.divergence]
    return {
        "kernel": f"{kernel} (fast vs faithful)",
        "divergence": True,
        "examples": len(both),
        "failed": len(found),
        "worst": None,
        "seconds": sum(s.shadow.seconds for s in both if s.shadow is not None),
        "status": KernelStatus.INTERPRETER_DIVERGENCE if found else KernelStatus.PASS,
    }


def oracle_rows(results: list[CaseResult], oracles: list[contract.Implementation]) -> list[dict[str, Any]]:
    """One summary row per oracle: an oracle outside its own tolerance is a finding about the
    oracle, shown apart with status ORACLE FINDING; it never fails a kernel or the run."""
    rows = []
    for oracle in oracles:
        mine = [s for r in results for s in r.subjects if s.implementation == oracle.name]
        used = [c.max_abs / c.bound for s in mine for c in s.comparisons if c.passed and c.bound > 0]
        found = [s for s in mine if not s.passed]
        rows.append(
            {
                "kernel": f"{oracle.name} (oracle)",
                "oracle": True,
                "examples": len(mine),
                "failed": len(found),
                "worst": max(used, default=None),
                "seconds": sum(s.seconds for s in mine),
                "status": KernelStatus.ORACLE_FINDING if found else KernelStatus.PASS,
            }
        )
    return rows


def cannot_run_row(kernel: str, reason: str) -> dict[str, Any]:
    row = {"kernel": kernel, "examples": 0, "failed": 0, "worst": None, "seconds": 0.0}
    return row | {"status": KernelStatus.CANNOT_RUN, "error": reason}
