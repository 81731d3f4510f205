"""The Hypothesis loop: shrinking within a budget, each case run once, the example database."""

from __future__ import annotations

import time

import pytest

from harness import profiles
from harness.search import search
from tests import _fakes


def test_a_failure_is_shrunk_to_the_known_minimal_case():
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False, shrink_runs=10)
    assert outcome.shrunk is not None and not outcome.shrunk.passed
    first = next(r for r in outcome.results if not r.passed)
    # The draw's first failure is not minimal (its seed and query length are larger), so a
    # shrinker that does nothing leaves it, and the equality below fails.
    minimal = _fakes.small_case()  # BROKEN's minimal failing case: head_dim 64, 32 keys, all else least
    assert first.case != minimal
    assert outcome.shrunk.case == minimal, f"shrunk to {outcome.shrunk.case}, not {minimal}"
    assert 0 < outcome.shrink_runs <= 10 and not outcome.shrink_exhausted


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
    # Nor does it save a failure there.
    assert search(_fakes.BROKEN, [], examples=10, profile="ci", database=db, grads=False, shrink_runs=2).shrunk
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


def test_a_seeded_search_neither_reads_nor_saves_the_database(tmp_path):
    # README: "ci (derandomized) and --seed runs do not use it". Hypothesis skips the database
    # under @seed; a seeded search that found a failure leaves nothing behind.
    db = tmp_path / ".hypothesis"
    kernel = _fakes.FakeKernel("tests._fakes:seeded", broken=lambda c: c.kv_len >= 32)
    outcome = search(kernel, [], examples=15, seed=1, profile="dev", database=db, grads=False, shrink_runs=3)
    assert outcome.shrunk is not None
    assert not db.exists() or not any(p.is_file() for p in db.rglob("*"))


@pytest.mark.parametrize(
    ("budget", "runs"),
    [
        (profiles.ShrinkBudget(runs=2, seconds=600), 2),  # the profile's run budget
        (profiles.ShrinkBudget(runs=60, seconds=0.0), 0),  # its time budget, spent at the first failure
    ],
)
def test_the_profiles_shrink_budget_applies(monkeypatch, budget, runs):
    monkeypatch.setitem(profiles.SHRINK_BUDGETS, "dev", budget)
    started = time.perf_counter()
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False)
    elapsed = time.perf_counter() - started
    first = next(r for r in outcome.results if not r.passed)
    assert outcome.shrink_runs == runs and outcome.shrink_exhausted
    assert outcome.shrunk.case != _fakes.small_case()  # stopped before the minimal case
    assert (outcome.shrunk.case == first.case) is (runs == 0)
    assert outcome.kernel == _fakes.BROKEN.name and not outcome.passed
    assert 0 <= outcome.first_failure_s <= elapsed


def test_a_passing_search_reports_every_case_once_and_computes_gradients_by_default(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen = []
    outcome = search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev", on_result=seen.append)
    assert not list(tmp_path.iterdir())  # no database given: nothing written anywhere
    assert outcome.passed and outcome.shrunk is None and outcome.first_failure_s is None
    assert seen == outcome.results and len(seen) == 3
    quantities = {c.quantity for r in seen for s in r.subjects for c in s.comparisons}
    assert {"out", "dq", "dk", "dv"} <= quantities


def test_an_interrupt_before_any_failure_keeps_nothing():
    def interrupt(result):
        raise KeyboardInterrupt

    outcome = search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev", grads=False, on_result=interrupt)
    assert outcome.interrupted and outcome.shrunk is None and len(outcome.results) == 1
    assert [c.quantity for c in outcome.results[0].subjects[0].comparisons] == ["out"]  # grads=False


def test_under_a_time_limit_each_case_runs_in_the_worker():
    # The worker resolves the kernel by name in its own process, so this process's fake sees no call.
    before = len(_fakes.CORRECT.calls)
    outcome = search(_fakes.CORRECT, [], examples=1, seed=1, profile="dev", grads=False, time_limit=120)
    assert outcome.passed and len(outcome.results) == 1
    assert len(_fakes.CORRECT.calls) == before


def test_the_seed_chooses_the_draw():
    draw = lambda seed: [
        r.case for r in search(_fakes.CORRECT, [], examples=3, seed=seed, profile="ci", grads=False).results
    ]  # noqa: E731
    first = draw(1)
    assert draw(1) == first and draw(2) != first


def test_a_store_error_while_searching_is_raised_as_itself_not_a_flaky_failure():
    written = []

    def full_disk(result):
        if written:  # the second case's record cannot be written
            raise OSError(28, "No space left on device")
        written.append(result)

    with pytest.raises(OSError, match="No space left on device"):
        search(_fakes.CORRECT, [], examples=5, seed=1, grads=False, on_result=full_disk)


def test_an_interrupt_that_hypothesis_turned_into_another_error_stops_the_search_as_an_interrupt():
    from harness.search import _interrupts_as_themselves

    def setup_interrupted() -> None:
        # What Hypothesis raised when SIGTERM landed while it read the test's source: its own
        # clean-up failed an assertion, the KeyboardInterrupt as its context (measured).
        try:
            raise KeyboardInterrupt("signal 15")
        except KeyboardInterrupt:
            raise AssertionError  # noqa: B904 - as Hypothesis raises it

    with pytest.raises(KeyboardInterrupt):
        _interrupts_as_themselves(setup_interrupted)

    def harness_bug() -> None:
        raise AssertionError("a real one")

    with pytest.raises(AssertionError, match="a real one"):
        _interrupts_as_themselves(harness_bug)
