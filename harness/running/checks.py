"""What a case result records of the checks beyond its comparison with the truth (CaseRecord.checks).

The names are harness.core.coverage.CHECKS; the runtime ones (reproducible, batch_invariant) are set
where they ran, the others follow from the case (coverage.case_checks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.case import Case
from harness.core.coverage import case_checks

if TYPE_CHECKING:
    from harness.running.runner import SubjectResult


def done(case: Case, subject: SubjectResult) -> SubjectResult:
    """`subject` with the case's own checks recorded and its arrays dropped (its checks have all run)."""
    subject.checks = [*subject.checks, *(c for c in case_checks(case) if c not in subject.checks)]
    subject.outputs = None
    if subject.shadow is not None:
        subject.shadow.outputs = None
    return subject
