"""The Hypothesis loop: shrinking within a budget, each case run once, the example database."""

from __future__ import annotations

import pytest

from harness.search import search
from tests import _fakes


def _size(case):
    return (case.batch, case.q_heads, case.kv_len, case.q_len, case.head_dim)


def test_a_failure_is_shrunk_to_a_small_case():
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False, shrink_runs=10)
    assert outcome.shrunk is not None and not outcome.shrunk.passed
    first = next(r for r in outcome.results if not r.passed)
    case = outcome.shrunk.case
    assert _size(case) <= _size(first.case)
    # The minimal failing case of BROKEN: head_dim 64 with the fewest keys that fail.
    assert (case.head_dim, case.kv_len) == (64, 32)


def test_shrinking_stops_at_the_budget_and_keeps_the_first_failure():
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False, shrink_runs=0)
    first = next(r for r in outcome.results if not r.passed)
    assert outcome.shrink_runs == 0 and outcome.shrink_exhausted
    assert outcome.shrunk.case == first.case


def test_each_case_runs_once():
    kernel = _fakes.FakeKernel("tests._fakes:counting", broken=_fakes.BROKEN.broken)
    search(kernel, [], examples=10, seed=5, profile="dev", grads=False, shrink_runs=5)
    assert len(kernel.calls) == len(set(kernel.calls))


def test_a_failure_found_once_is_tried_first_next_time(tmp_path):
    # Unseeded dev runs use the database (a seeded or derandomized draw does not).
    db = tmp_path / ".hypothesis"
    kernel = _fakes.FakeKernel("tests._fakes:long_keys", broken=lambda c: c.kv_len >= 32)
    first = search(kernel, [], examples=15, profile="dev", database=db, grads=False, shrink_runs=5)
    assert first.shrunk is not None
    again = search(kernel, [], examples=15, profile="dev", database=db, grads=False, shrink_runs=0)
    assert again.results[0].case == first.shrunk.case
    assert not again.results[0].passed


def test_derandomized_ci_ignores_the_database(tmp_path):
    db = tmp_path / ".hypothesis"
    a = search(_fakes.CORRECT, [], examples=4, profile="ci", database=db, grads=False)
    b = search(_fakes.CORRECT, [], examples=4, profile="ci", database=db, grads=False)
    assert [r.case for r in a.results] == [r.case for r in b.results]
    assert not db.exists()


def test_interrupt_keeps_the_best_failure_so_far():
    calls = {"n": 0}

    def broken(case):
        calls["n"] += 1
        if calls["n"] > 1 and case.head_dim == 64:
            return True
        return False

    def interrupt_after_failure(result):
        if not result.passed:
            raise KeyboardInterrupt

    kernel = _fakes.FakeKernel("tests._fakes:interrupted", broken=broken)
    outcome = search(kernel, [], examples=10, seed=3, profile="dev", grads=False, on_result=interrupt_after_failure)
    assert outcome.interrupted
    assert outcome.shrunk is not None and not outcome.shrunk.passed


def test_a_store_error_while_searching_is_raised_as_itself_not_a_flaky_failure():
    written = []

    def full_disk(result):
        if written:  # the second case's record cannot be written
            raise OSError(28, "No space left on device")
        written.append(result)

    with pytest.raises(OSError, match="No space left on device"):
        search(_fakes.CORRECT, [], examples=5, seed=1, grads=False, on_result=full_disk)
