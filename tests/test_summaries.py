"""harness.running.summaries: a kernel row says FAIL, FLAKY FAIL or PASS by the rules of harness.core.verdicts."""

from __future__ import annotations

import dataclasses

import pytest

from harness.core import features
from harness.core.verdicts import Replay
from harness.running import summaries
from harness.running.runner import CaseResult, SubjectResult
from harness.running.search import SearchOutcome
from harness.store.schema import KernelStatus
from tests import _fakes

K = "k"


def _result(passed: bool, replays: tuple[Replay, ...] = ()) -> CaseResult:
    subject = SubjectResult(
        implementation=K,
        role="kernel",
        backend="tpu_interpret",
        empty_rows="zeros",
        passed=passed,
        comparisons=[],
        error=None if passed else "WorkerDied: killed by SIGSEGV",
        interpreter="fast",
        replays=replays,
    )
    return CaseResult(case=_fakes.small_case(), subjects=[subject])


FLAKY = (Replay(interpreter="fast", passed=True),)
AGAIN = (Replay(interpreter="fast", passed=False),)


@pytest.mark.parametrize(
    ("results", "failures", "planned", "status"),
    [
        pytest.param([True, True], [], 2, KernelStatus.PASS, id="pass"),
        pytest.param([True, False], [AGAIN], 2, KernelStatus.FAIL, id="reproduced"),
        pytest.param([True, False], [FLAKY], 2, KernelStatus.FLAKY_FAIL, id="flaky"),
        pytest.param([False, False], [FLAKY, AGAIN], 2, KernelStatus.FAIL, id="one-reproduced"),
        # Nothing checked of what was planned (a kernel that took its run down on its first call): never a pass.
        pytest.param([], [], 4, KernelStatus.FAIL, id="none-checked"),
        pytest.param([], [], 0, KernelStatus.PASS, id="none-planned"),  # a shard that owns no case
    ],
)
def test_a_kernel_row_passes_only_when_every_planned_case_was_checked_and_passed(results, failures, planned, status):
    outcome = SearchOutcome(kernel=K, results=[_result(p) for p in results])
    outcome.failures = [_result(False, r) for r in failures]
    covered = features.coverage(_fakes.CORRECT, [])
    row = summaries.kernel_row(K, outcome, 1.0, covered, planned=planned)
    assert row.status == status
    assert (row.error is not None) == (status == KernelStatus.FAIL and not results)


def test_a_flaky_failure_is_the_one_that_passed_under_its_own_interpreter():
    (s,) = _result(False, (Replay(interpreter="faithful", passed=True),)).subjects
    assert not s.flaky  # passing under the other interpreter says nothing of this one's replay
    assert dataclasses.replace(s, replays=FLAKY).flaky
