"""The summary rows of a run (run.json "summary", harness.core.summary.KernelSummary): one per kernel
searched, per oracle, and per kernel whose two Pallas interpreters were compared; each from the search's results."""

from __future__ import annotations

from harness.core import contract, features, summary
from harness.core.summary import DIVERGENCE_SUFFIX, ORACLE_SUFFIX, KernelSummary
from harness.running.runner import CaseResult
from harness.running.search import SearchOutcome
from harness.store.schema import KernelStatus


def kernel_row(
    kernel: str, outcome: SearchOutcome, seconds: float, covered: features.Coverage, *, planned: int
) -> KernelSummary:
    """The kernel's row: FAIL where a failure reproduced, FLAKY FAIL where every failure passed on its replay,
    PASS only where every case passed and at least one of `planned` was checked (harness.core.verdicts)."""
    mine = [s for r in outcome.results for s in r.subjects if s.implementation == kernel]
    failed = [s for r in outcome.failures for s in r.subjects if s.implementation == kernel and not s.passed]
    error = None
    if outcome.interrupted:
        status = KernelStatus.INTERRUPTED
    elif failed and all(s.flaky for s in failed):
        status = KernelStatus.FLAKY_FAIL
    elif not outcome.passed:
        status = KernelStatus.FAIL
    elif planned and not outcome.results:
        status, error = KernelStatus.FAIL, f"no case checked of the {planned} planned"
    else:
        status = KernelStatus.PASS
    return KernelSummary(
        kernel=kernel,
        examples=len(outcome.results),
        failed=sum(not r.passed for r in outcome.results),
        worst=summary.worst_used(mine),
        seconds=seconds,
        status=status,
        pairwise=covered.to_json(),
        error=error,
    )


def divergence_row(kernel: str, results: list[CaseResult]) -> KernelSummary | None:
    """The summary row of a kernel's interpreter divergences (a finding about an interpreter, reported
    apart like an oracle's: never a kernel failure), over the cases both interpreters ran; None where none did."""
    both = [s for r in results for s in r.subjects if s.implementation == kernel and s.shadow is not None]
    if not both:
        return None
    found = [s for s in both if s.divergence]
    return KernelSummary(
        kernel=kernel + DIVERGENCE_SUFFIX,
        divergence=True,
        examples=len(both),
        failed=len(found),
        worst=None,
        seconds=sum(s.shadow.seconds for s in both if s.shadow is not None),
        status=KernelStatus.INTERPRETER_DIVERGENCE if found else KernelStatus.PASS,
    )


def oracle_rows(results: list[CaseResult], oracles: list[contract.Implementation]) -> list[KernelSummary]:
    """One summary row per oracle: an oracle outside its own tolerance is a finding about the
    oracle, shown apart with status ORACLE FINDING; it never fails a kernel or the run."""
    rows = []
    for oracle in oracles:
        mine = [s for r in results for s in r.subjects if s.implementation == oracle.name]
        found = [s for s in mine if not s.passed]
        rows.append(
            KernelSummary(
                kernel=oracle.name + ORACLE_SUFFIX,
                oracle=True,
                examples=len(mine),
                failed=len(found),
                worst=summary.worst_used(mine),
                seconds=sum(s.seconds for s in mine),
                status=KernelStatus.ORACLE_FINDING if found else KernelStatus.PASS,
            )
        )
    return rows


def cannot_run_row(kernel: str, reason: str) -> KernelSummary:
    """A kernel the interpreter cannot run here: a result with its error, never a pass."""
    return KernelSummary(
        kernel=kernel, examples=0, failed=0, worst=None, seconds=0.0, status=KernelStatus.CANNOT_RUN, error=reason
    )
