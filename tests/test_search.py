"""The Hypothesis loop: shrinking within a budget, each case run once, the example database.

Most tests run `search` on a stand-in runner (no JAX), so that each takes about a second and
`nox -s mutation` can run them for every mutant of harness/running/search.py; the few marked
`no_mutation` run the real runner end to end.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import time
import types
from pathlib import Path

import hypothesis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import features, pool, profiles, strategies
from harness.core import smoke as smoke_module
from harness.core.case import Case
from harness.core.masks import Mask
from harness.running import runner as harness_runner
from harness.running import search as search_module
from harness.running import signatures
from harness.running.runner import CaseResult, SubjectResult
from harness.running.search import search
from harness.runtime.compat import DEFAULT_INTERPRET, InterpretOptions
from tests import _fakes

_real_cache_path = smoke_module.cache_path  # before tests/conftest.py turns the smoke cache off for each test


@pytest.fixture(scope="session")
def _smoke_dir(tmp_path_factory) -> Path:
    # Beside every xdist worker's own temporary directory: the workers of one session share it.
    root = tmp_path_factory.getbasetemp()
    return (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "search-smoke"


@pytest.fixture(autouse=True)
def _fakes_smoke_set_kept(_no_smoke_cache, _smoke_dir, monkeypatch):
    """The fakes' smoke set, kept on disk as a run keeps a kernel's (smoke.cache_path), in one directory per session.

    Every search with a pool starts from it, and finding it draws thousands of cases (for the extreme regimes and
    the rows with no key that no fake has). Keyed by what it depends on (class and capabilities, neither the fake's
    name nor its verdict), the fakes here share one set, found once. Finding it, and the cache: tests/test_smoke.py.
    """
    monkeypatch.setattr(smoke_module.compat, "compilation_cache_dir", lambda: str(_smoke_dir / "jax"))
    monkeypatch.setattr(smoke_module, "cache_path", _real_cache_path)


def _smoke_set(kernel) -> list[Case]:
    """The smoke set a search of `kernel` starts from (read from the kept set, as the search reads it)."""
    return list(smoke_module.iter_smoke_cases(kernel))


# --- end to end, on the real runner (JAX computes the reference for every case) ---


@pytest.mark.no_mutation
def test_on_the_real_runner_a_failure_is_shrunk_to_the_known_minimal_case():
    # Whole cases (reuse=False), as its stand-in twin below: the seed was chosen for that draw.
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False, shrink_runs=10, reuse=False)
    assert outcome.shrunk is not None and not outcome.shrunk.passed
    first = next(r for r in outcome.results if not r.passed)
    # The draw's first failure is not minimal (its seed and query length are larger), so a
    # shrinker that does nothing leaves it, and the equality below fails.
    minimal = _fakes.broken_minimal()  # BROKEN's minimal failing case: head_dim 64, 32 keys, all else plainest
    assert first.case != minimal
    assert outcome.shrunk.case == minimal, f"shrunk to {outcome.shrunk.case}, not {minimal}"
    assert 0 < outcome.shrink_runs <= 10 and not outcome.shrink_exhausted
    assert outcome.shrinks[0].trigger == ()  # unequal lengths left out: the bug needs nothing beyond the plainest


@pytest.mark.no_mutation
def test_a_passing_search_reports_every_case_once_and_computes_gradients_by_default(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen = []
    outcome = search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev", on_result=seen.append)
    assert not list(tmp_path.iterdir())  # no database given: nothing written anywhere
    assert outcome.passed and outcome.shrunk is None and outcome.first_failure_s is None
    assert seen == outcome.results and len(seen) == 3
    quantities = {c.quantity for r in seen for s in r.subjects for c in s.comparisons}
    assert {"out", "dq", "dk", "dv"} <= quantities


@pytest.mark.no_mutation
def test_under_a_time_limit_each_case_runs_in_the_worker():
    # The worker resolves the kernel by name in its own process, so this process's fake sees no call.
    before = len(_fakes.CORRECT.calls)
    outcome = search(_fakes.CORRECT, [], examples=1, seed=1, profile="dev", grads=False, time_limit=120)
    assert outcome.passed and len(outcome.results) == 1
    assert len(_fakes.CORRECT.calls) == before


@pytest.mark.no_mutation
def test_a_store_error_while_searching_is_raised_as_itself_not_a_flaky_failure():
    written = []

    def full_disk(result):
        if written:  # the second case's record cannot be written
            raise OSError(28, "No space left on device")
        written.append(result)

    with pytest.raises(OSError, match="No space left on device"):
        search(_fakes.CORRECT, [], examples=5, seed=1, grads=False, on_result=full_disk)


# --- search's own logic, on a stand-in runner: no JAX, so each test runs in about a second ---
# The runner is the seam: `search` hands each case to runner.run_case and steers Hypothesis by
# the verdict it returns. A stand-in that judges by the fake kernel's `broken` predicate gives
# the verdicts a real run would (the fakes compute the reference, broken or not) without
# compiling anything, so these tests also serve `nox -s mutation`, which runs them per mutant.
# Tests of the loop's bookkeeping draw whole cases (reuse=False): their seeds were chosen for
# that draw (a first failure that is not minimal); the pool's draw has its own tests below.


class StandInRunner:
    """runner.run_case for fake kernels: the verdict of `broken`, and a log of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Case, bool, float | None]] = []

    def run_case(
        self,
        case: Case,
        subjects: list,
        *,
        grads: bool = True,
        time_limit: float | None = None,
        interpret: InterpretOptions = DEFAULT_INTERPRET,  # runner.run_case's; the fakes interpret nothing
        policy: str | None = None,
        smoke: bool = False,
    ) -> CaseResult:
        self.calls.append((case, grads, time_limit))
        kernel = subjects[0]
        verdict = kernel.broken(case)  # falsy, True (wrong values) or the name of the exception raised
        return CaseResult(
            case,
            [
                SubjectResult(
                    implementation=kernel.name,
                    role=kernel.role,
                    backend="cpu",
                    empty_rows="zeros",
                    passed=not verdict,
                    comparisons=[],
                    error=f"{verdict}: planted" if isinstance(verdict, str) else None,
                )
            ],
        )

    @property
    def cases(self) -> list[Case]:
        return [c for c, _, _ in self.calls]


@pytest.fixture
def stand_in(monkeypatch) -> StandInRunner:
    runner = StandInRunner()
    monkeypatch.setattr(harness_runner, "run_case", runner.run_case)
    return runner


def test_a_failure_is_shrunk_to_the_known_minimal_case(stand_in):
    # first_failure: the search stops there, so every case run after the first failure is a shrink run.
    outcome = search(
        _fakes.BROKEN,
        [],
        examples=10,
        seed=3,
        profile="dev",
        grads=False,
        shrink_runs=60,
        reuse=False,
        first_failure=True,
    )
    first = next(r for r in outcome.results if not r.passed)
    minimal = _fakes.broken_minimal()
    assert first.case != minimal  # so a shrinker that does nothing fails the next line
    assert outcome.shrunk.case == minimal, f"shrunk to {outcome.shrunk.case}, not {minimal}"
    assert not outcome.shrink_exhausted and not outcome.passed and outcome.error is None
    # Every case run after the first failure is a shrink run, and none of them is a result.
    generated = stand_in.cases[: stand_in.cases.index(first.case) + 1]
    assert [r.case for r in outcome.results] == generated
    assert outcome.shrink_runs == len(stand_in.calls) - len(generated) > 0


def test_each_case_runs_once_and_every_generated_case_is_reported(stand_in):
    seen = []
    outcome = search(
        _fakes.BROKEN,
        [],
        examples=10,
        seed=5,
        profile="dev",
        grads=False,
        on_result=seen.append,
        reuse=False,
        first_failure=True,
    )
    assert len(stand_in.cases) == len(set(stand_in.cases))
    assert seen == outcome.results
    assert not outcome.results[-1].passed and all(r.passed for r in outcome.results[:-1])


@pytest.mark.parametrize("runs", [0, 1, 3])
def test_the_shrink_run_budget_is_exact(stand_in, runs):
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False, shrink_runs=runs, reuse=False)
    first = next(r for r in outcome.results if not r.passed)
    # Hypothesis's runs, then the trigger search's share past them (search.TRIGGER_SHARE): none with no budget.
    extra = runs // search_module.TRIGGER_SHARE
    assert runs <= outcome.shrink_runs <= runs + extra and outcome.shrink_runs == len(stand_in.calls) - len(
        outcome.results
    )
    assert outcome.shrink_exhausted
    if runs == 0:
        assert outcome.shrunk.case == first.case
    assert not outcome.shrunk.passed  # the best failure, never a candidate that was not run


@pytest.mark.parametrize(
    ("budget", "runs"),
    [
        (profiles.ShrinkBudget(runs=2, seconds=600), 2),  # the profile's run budget
        (profiles.ShrinkBudget(runs=60, seconds=0.0), 0),  # its time budget, spent at the first failure
    ],
)
def test_the_profiles_shrink_budget_applies(stand_in, monkeypatch, budget, runs):
    monkeypatch.setitem(profiles.SHRINK_BUDGETS, "dev", budget)
    started = time.perf_counter()
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False, reuse=False)
    elapsed = time.perf_counter() - started
    assert outcome.shrink_runs == runs and outcome.shrink_exhausted
    assert outcome.kernel == _fakes.BROKEN.name and not outcome.passed
    assert 0 < outcome.first_failure_s <= elapsed


def test_the_time_budget_counts_from_the_first_failure_and_stops_past_it(stand_in, monkeypatch):
    # A clock that reads 10 s later at every look: the search starts at 0, fails first at 10;
    # candidates looked at 20 and 30 are within 20 s of it, 40 is past it.
    monkeypatch.setitem(profiles.SHRINK_BUDGETS, "dev", profiles.ShrinkBudget(runs=60, seconds=20.0))
    readings = iter(range(0, 10_000, 10))
    monkeypatch.setattr(search_module, "time", types.SimpleNamespace(perf_counter=lambda: float(next(readings))))
    outcome = search(_fakes.BROKEN, [], examples=10, seed=3, profile="dev", grads=False, reuse=False)
    assert outcome.first_failure_s == 10.0
    assert outcome.shrink_runs == 2 and outcome.shrink_exhausted


def test_arguments_reach_the_runner(stand_in):
    search(_fakes.CORRECT, [], examples=2, seed=1, profile="dev")
    search(_fakes.CORRECT, [], examples=2, seed=1, profile="dev", grads=False, time_limit=7.5)
    assert [(g, t) for _, g, t in stand_in.calls] == [(True, None)] * 2 + [(False, 7.5)] * 2


def test_examples_and_profile_set_the_number_of_cases(stand_in, monkeypatch):
    assert len(search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev").results) == 3
    monkeypatch.setitem(profiles.PROFILES, "dev", settings(profiles.PROFILES["dev"], max_examples=4))
    outcome = search(_fakes.CORRECT, [], seed=1, profile="dev")
    assert len(outcome.results) == 4 and outcome.passed and outcome.shrunk is None
    assert outcome.first_failure_s is None and outcome.shrink_runs == 0 and not outcome.shrink_exhausted


def test_the_oracles_follow_the_kernel(stand_in, monkeypatch):
    subjects = []
    monkeypatch.setattr(
        harness_runner,
        "run_case",
        lambda case, subj, **kw: subjects.append(subj) or stand_in.run_case(case, subj, **kw),
    )
    search(_fakes.CORRECT, [_fakes.NAN, _fakes.RAISES], examples=1, seed=1, profile="dev")
    assert subjects == [[_fakes.CORRECT, _fakes.NAN, _fakes.RAISES]]


def test_a_failure_is_saved_and_replayed_first_from_the_database(stand_in, tmp_path):
    db = tmp_path / ".hypothesis"
    # Fails on every case but the first it meets: an unseeded 15-case draw always meets a second
    # one (a failure on kv_len >= 32 was missed by 1 draw in 12), and without the database the
    # second search could start from that passing first case.
    met: dict[str, Case] = {}
    broken = lambda c: c != met.setdefault("case", c)  # noqa: E731
    kernel = _fakes.FakeKernel("tests._fakes:all_but_the_first_case", broken=broken)
    # Stopping at the first failure: a search that goes on saves each distinct failure it shrinks,
    # and the next search may replay any of them first.
    kw = {"examples": 15, "profile": "dev", "database": db, "grads": False, "first_failure": True}
    first = search(kernel, [], shrink_runs=5, **kw)
    assert first.shrunk is not None and any(p.is_file() for p in db.rglob("*"))
    again = search(kernel, [], shrink_runs=0, **kw)
    # Replayed first: the failure Hypothesis shrank to (the report's case is then reduced over its features,
    # outside Hypothesis: harness.running.trigger), never the passing first case a fresh draw starts from.
    assert again.results[0].case != met["case"] and not again.results[0].passed


@pytest.mark.parametrize("kw", [{"profile": "ci"}, {"profile": "dev", "seed": 4}], ids=["derandomized", "seeded"])
def test_no_database_under_a_fixed_draw(stand_in, tmp_path, kw):
    db = tmp_path / ".hypothesis"
    # A bug in half the cases: every draw meets it (the derandomized one moves with search's source).
    kernel = _fakes.FakeKernel("tests._fakes:wide", broken=lambda c: c.head_dim == 64)
    assert search(kernel, [], examples=10, database=db, grads=False, shrink_runs=2, reuse=False, **kw).shrunk
    assert not db.exists() or not any(p.is_file() for p in db.rglob("*"))


def test_the_database_is_per_kernel(stand_in, tmp_path):
    db = tmp_path / ".hypothesis"
    broken = _fakes.FakeKernel("tests._fakes:a", broken=lambda c: c.kv_len >= 32 and c.head_dim == 64)
    search(broken, [], examples=15, profile="dev", database=db, grads=False, shrink_runs=5)
    other = _fakes.FakeKernel("tests._fakes:b")
    again = search(other, [], examples=1, profile="dev", database=db, grads=False)
    assert again.results[0].case != _fakes.small_case()  # a's failure is not replayed for b


def test_the_seed_chooses_the_draw_and_the_kernel_its_digest(stand_in):
    def draw(kernel, seed):
        return [r.case for r in search(kernel, [], examples=3, seed=seed, profile="ci", grads=False).results]

    first = draw(_fakes.CORRECT, 1)
    assert draw(_fakes.CORRECT, 1) == first and draw(_fakes.CORRECT, 2) != first
    ci = lambda kernel: [r.case for r in search(kernel, [], examples=3, profile="ci").results]  # noqa: E731
    assert ci(_fakes.CORRECT) == ci(_fakes.CORRECT) != ci(_fakes.FakeKernel("tests._fakes:other"))


def test_a_derandomized_draw_is_seeded_by_the_kernel_and_phase_alone(stand_in):
    # Not by a digest of the search's own source: any Hypothesis test seeded with phase_seed draws the
    # same cases, so editing harness/running/search.py cannot move a ci run's draw.
    kernel = _fakes.CORRECT
    outcome = search(kernel, [], examples=3, profile="ci", grads=False, reuse=False)
    drawn: list[Case] = []
    seed = search_module.phase_seed(kernel.name, None, "whole")
    ci = settings(profiles.get("ci"), max_examples=3 * search_module.DRAWS_PER_CASE, database=None)

    def collect(case: Case) -> None:
        drawn.append(case)

    hypothesis.seed(seed)(ci(given(strategies.cases(kernel))(collect)))()
    assert [r.case for r in outcome.results] == list(dict.fromkeys(drawn))[:3]
    pool_seed = search_module.phase_seed(kernel.name, None, "pool")
    assert seed != pool_seed != search_module.phase_seed("other", None, "pool")
    assert search_module.phase_seed(kernel.name, 7, "pool") == 7  # --seed: every phase draws from it


def test_an_interrupt_keeps_the_best_failure_so_far(stand_in):
    def interrupt_after_failure(result):
        if not result.passed:
            raise KeyboardInterrupt

    outcome = search(
        _fakes.BROKEN,
        [],
        examples=10,
        seed=3,
        profile="dev",
        grads=False,
        on_result=interrupt_after_failure,
        reuse=False,
    )
    assert outcome.interrupted and outcome.error is None
    assert outcome.shrunk is outcome.results[-1] and not outcome.shrunk.passed


def test_an_interrupt_in_the_runner_is_an_interrupt(stand_in, monkeypatch):
    def interrupted(case, subjects, **kw):
        raise RuntimeError("INTERNAL: CpuCallback error: KeyboardInterrupt")

    monkeypatch.setattr(harness_runner, "run_case", interrupted)
    outcome = search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev")
    assert outcome.interrupted and outcome.shrunk is None and outcome.results == []


def test_an_interrupt_before_any_failure_keeps_nothing(stand_in):
    def interrupt(result):
        raise KeyboardInterrupt

    outcome = search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev", on_result=interrupt)
    assert outcome.interrupted and outcome.shrunk is None and len(outcome.results) == 1


@pytest.mark.parametrize("where", ["runner", "on_result"])
def test_a_harness_error_is_raised_as_itself(stand_in, monkeypatch, where):
    def fail(*args, **kw):
        raise OSError(28, "No space left on device")

    if where == "runner":
        monkeypatch.setattr(harness_runner, "run_case", fail)
    with pytest.raises(OSError, match="No space left on device") as raised:
        search(
            _fakes.CORRECT,
            [],
            examples=5,
            seed=1,
            profile="dev",
            on_result=fail if where == "on_result" else lambda r: None,
        )
    assert isinstance(raised.value, OSError)


@pytest.mark.parametrize("live", [1, 3])
def test_jax_caches_are_cleared_only_when_a_new_program_would_pass_the_live_bound(stand_in, monkeypatch, live):
    cleared = []
    monkeypatch.setattr(search_module, "LIVE_PROGRAMS", live)
    monkeypatch.setattr(search_module.jax, "clear_caches", lambda: cleared.append(len(stand_in.calls)))
    search(_fakes.CORRECT, [], examples=30, seed=3, profile="dev", grads=False)
    expected, programs = [], set()
    for i, case in enumerate(stand_in.cases):
        if pool.program_key(case) not in programs:
            if len(programs) >= live:
                expected.append(i)
                programs.clear()
            programs.add(pool.program_key(case))
    assert cleared == expected
    # Past one live program, cases of the pool reuse theirs: fewer clears than program changes.
    keys = [pool.program_key(c) for c in stand_in.cases]
    assert (len(cleared) < sum(a != b for a, b in zip(keys, keys[1:], strict=False))) is (live > 1)


def test_a_failure_drawn_from_the_pool_is_shrunk_to_the_smallest_failing_entry_with_the_least_data(stand_in):
    # Pool entries come from the cheaper half of the candidates (pool.cost): a bug in head_dim 64, not in long keys.
    kernel = _fakes.FakeKernel("tests._fakes:wide_heads", broken=lambda c: c.head_dim >= 64)
    # Seed 4: the first failure is not the minimal one. (Among a pool's many entries Hypothesis's
    # shrinker can also stop at a failing entry past the smallest, seeds 1, 2 and 5: a local minimum.)
    outcome = search(kernel, [], examples=40, seed=4, profile="dev", grads=False, shrink_runs=60, first_failure=True)
    first = next(r for r in outcome.results if not r.passed)
    entries = pool.draw_pool(
        kernel, extra=pool.extra_entries(40), seed=pool.pool_seed(kernel, 4), smoke=_smoke_set(kernel)
    )
    assert pool.program_key(first.case) in {pool.program_key(c) for c in entries}
    minimal = next(c for c in entries if kernel.broken(c)).replace(seed=0, regime="normal")
    assert first.case != minimal  # so a shrinker that does nothing fails the next line
    # Then reduced over its features (harness.running.trigger): the mask the bug does not need goes too.
    minimal = minimal.replace(mask=Mask())
    assert outcome.shrunk.case == minimal, f"shrunk to {outcome.shrunk.case}, not {minimal}"


def test_a_failure_drawn_fresh_is_shrunk_as_a_whole_case(stand_in, monkeypatch):
    # BROKEN's bug, but only outside the pool's programs: a fresh draw finds it, and it shrinks
    # to BROKEN's minimal case (not in the pool either). A pool of a few entries: the fake's
    # contract has few programs, and a run's pool would hold most of them.
    monkeypatch.setattr(pool, "ENTRIES_PER_CASE", 1 / 12)
    programs: set[Case] = set()
    kernel = _fakes.FakeKernel(
        "tests._fakes:fresh_only", broken=lambda c: _fakes.BROKEN.broken(c) and pool.program_key(c) not in programs
    )
    entries = pool.draw_pool(
        kernel, extra=pool.extra_entries(80), seed=pool.pool_seed(kernel, 1), smoke=_smoke_set(kernel)
    )
    programs.update(pool.program_key(c) for c in entries)
    assert pool.program_key(_fakes.broken_minimal()) not in programs
    # 80 cases: the last 80 // FRESH_ONE_IN = 5 are drawn whole.
    outcome = search(kernel, [], examples=80, seed=1, profile="dev", grads=False, shrink_runs=60, first_failure=True)
    assert all(pool.program_key(r.case) in programs for r in outcome.results[: 80 - 80 // search_module.FRESH_ONE_IN])
    first = next(r for r in outcome.results if not r.passed)
    assert first.case != _fakes.broken_minimal()
    assert outcome.shrunk.case == _fakes.broken_minimal(), f"shrunk to {outcome.shrunk.case}"


def test_the_pools_programs_take_turns(stand_in):
    # No entry's program gets another case before every entry has had as many: a run checks as
    # many programs as its pool holds before it repeats one.
    entries = pool.draw_pool(
        _fakes.CORRECT,
        extra=pool.extra_entries(40),
        seed=pool.pool_seed(_fakes.CORRECT, 3),
        smoke=_smoke_set(_fakes.CORRECT),
    )
    keys = {pool.program_key(c) for c in entries}
    outcome = search(_fakes.CORRECT, [], examples=40, seed=3, profile="dev", grads=False)
    pooled = [pool.program_key(r.case) for r in outcome.results[: 40 - 40 // search_module.FRESH_ONE_IN]]
    assert set(pooled) <= keys and len(set(pooled)) == min(len(keys), len(pooled)) > 1
    uses = dict.fromkeys(keys, 0)
    for key in pooled:
        assert uses[key] <= min(uses.values())  # its turn
        uses[key] += 1


def test_freed_memory_is_released_after_every_case(stand_in, monkeypatch):
    trims = []

    class Libc:
        def malloc_trim(self, pad: int) -> int:
            trims.append(pad)
            return 1

    monkeypatch.setattr(search_module, "_libc", Libc)
    search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev")
    assert trims == [0, 0, 0]
    monkeypatch.setattr(search_module, "_libc", lambda: ctypes.CDLL("no-such-library.so"))
    assert search(_fakes.CORRECT, [], examples=1, seed=1, profile="dev").passed  # no libc: a no-op


class _Drifting(_fakes.FakeKernel):
    """Fails every case, and its block strategy draws another kind of value after the first call,
    so Hypothesis cannot replay the failure it found (a strategy that depends on outside state).
    Searched with reuse=False: drawing a pool would make that first call."""

    def __init__(self) -> None:
        super().__init__("tests._fakes:drifting", broken=lambda case: True)
        self.strategies = 0

    def block_strategy(self, case: Case):
        self.strategies += 1
        drawn = st.integers(1, 9) if self.strategies == 1 else st.booleans().map(int)
        return st.fixed_dictionaries({"block": drawn})


def test_a_failure_that_cannot_be_replayed_is_reported_flaky_with_the_failure_kept(stand_in):
    outcome = search(_Drifting(), [], examples=5, seed=1, profile="dev", reuse=False)
    assert outcome.error.startswith("flaky failure (did not reproduce on replay): Inconsistent")
    assert "\n" not in outcome.error  # the first line of Hypothesis's message only
    assert outcome.shrunk is outcome.results[0] and not outcome.shrunk.passed and not outcome.passed


# Two bugs, each with its own minimal case: long keys at head_dim 64 raise IndexError (BROKEN's
# bug), causal masks at head_dim 32 raise ValueError.
def _two_bugs(case: Case) -> str | None:
    if case.head_dim == 64 and case.kv_len >= 32:
        return "IndexError"
    if case.head_dim == 32 and case.mask.causal is not None:
        return "ValueError"
    return None


TWO_BUGS = _fakes.FakeKernel("tests._fakes:two_bugs", broken=_two_bugs)


def test_the_search_goes_on_after_a_failure_and_shrinks_each_distinct_one(stand_in):
    seen = []
    outcome = search(
        TWO_BUGS,
        [],
        examples=30,
        seed=3,
        profile="dev",
        grads=False,
        shrink_runs=60,
        reuse=False,
        on_result=seen.append,
    )
    assert len(outcome.results) == 30 and seen == outcome.results  # the budget drawn whole, each case reported
    failing = [r for r in outcome.results if not r.passed]
    assert {_two_bugs(r.case) for r in failing} == {"IndexError", "ValueError"}
    assert len(failing) > 2  # several failing cases of each, reported as two failures
    assert [_two_bugs(f.case) for f in outcome.failures] == sorted(
        {_two_bugs(r.case) for r in failing}, key=[_two_bugs(r.case) for r in failing].index
    )  # in the order their first failing cases came
    # BROKEN's bug fails at any query length: shrunk to whichever Hypothesis reaches (equal
    # lengths, the more general, replace unequal ones when both are found).
    minimal = {"IndexError": {_fakes.small_case(), _fakes.small_case(q_len=32)}}
    minimal["ValueError"] = {_fakes.small_case(kv_len=16, head_dim=32, mask=Mask(causal="top_left"))}
    for failure, stats in zip(outcome.failures, outcome.shrinks, strict=True):
        assert failure.case in minimal[_two_bugs(failure.case)], f"shrunk to {failure.case}"
        assert stats.shrunk and 0 < stats.runs <= 60
    assert outcome.shrink_runs == len(stand_in.calls) - 30 >= sum(s.runs for s in outcome.shrinks)
    assert len(stand_in.cases) == len(set(stand_in.cases))  # each case still runs once
    assert outcome.shrunk is outcome.failures[0] and not outcome.passed


def test_first_failure_stops_at_the_first_and_shrinks_it_whatever_it_meets(stand_in):
    outcome = search(TWO_BUGS, [], examples=30, seed=3, profile="dev", grads=False, reuse=False, first_failure=True)
    assert len(outcome.failures) == 1 and not outcome.results[-1].passed
    assert all(r.passed for r in outcome.results[:-1])


def test_failures_past_the_shrink_cap_are_reported_as_found(stand_in, monkeypatch):
    monkeypatch.setattr(search_module, "MAX_SHRUNK", 1)
    outcome = search(TWO_BUGS, [], examples=30, seed=3, profile="dev", grads=False, reuse=False)
    assert len(outcome.failures) == 2 and [s.shrunk for s in outcome.shrinks] == [True, False]
    assert outcome.failures[1] in outcome.results  # as drawn, not shrunk
    assert outcome.shrink_runs == outcome.shrinks[0].runs


def test_each_failure_has_its_own_shrink_budget(stand_in):
    outcome = search(TWO_BUGS, [], examples=30, seed=3, profile="dev", grads=False, shrink_runs=2, reuse=False)
    # Shrunk two cases each, and the trigger search's share past them (search.TRIGGER_SHARE): failures keep
    # features of their draw, more than two are reported.
    each = 2 + 2 // search_module.TRIGGER_SHARE
    assert len(outcome.shrinks) >= 2 and {(s.runs, s.exhausted) for s in outcome.shrinks if s.shrunk} == {(each, True)}
    shrinks = outcome.shrink_runs // each  # those replaced by a more general failure too
    assert outcome.shrink_runs % each == 0 and len(outcome.shrinks) <= shrinks <= search_module.MAX_SHRUNK
    assert outcome.shrink_exhausted


def test_a_failure_met_while_shrinking_another_is_reported_and_reduced_after_the_search(stand_in):
    # Long keys fail; with seed 0 in another way. The draw meets only the first (its seeds are
    # random), shrinking it (towards seed 0) the second: reported too, reduced to its trigger once the drawn
    # cases are through (Search.reduce_met; it had been reported as found, unshrunk).
    def broken(case: Case) -> str | None:
        return None if case.kv_len < 32 else "IndexError" if case.seed else "ValueError"

    kernel = _fakes.FakeKernel("tests._fakes:seed_zero", broken=broken)
    outcome = search(kernel, [], examples=3, seed=3, profile="dev", grads=False, shrink_runs=20, reuse=False)
    assert [broken(r.case) for r in outcome.results if not r.passed] == ["IndexError"]
    assert [broken(f.case) for f in outcome.failures] == ["IndexError", "ValueError"]
    assert [s.shrunk for s in outcome.shrinks] == [True, True] and outcome.shrinks[1].trigger is not None
    assert outcome.failures[0].case.seed == 1  # shrunk as far as its own kind of failure goes


def test_a_passing_search_prints_nothing_of_hypothesis(stand_in, capsys):
    # Unseeded and random (dev): Hypothesis would say how to reproduce "this failure" when _Enough stops it.
    assert search(_fakes.CORRECT, [], examples=3, profile="dev", grads=False).passed
    assert capsys.readouterr().out == ""


def test_an_interrupt_that_hypothesis_turned_into_another_error_stops_the_search_as_an_interrupt():
    from harness.running.search import _interrupts_as_themselves

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


def _smoke(n: int) -> list[Case]:
    return [Case(batch=1, q_heads=1, kv_heads=1, q_len=8, kv_len=8, head_dim=32, seed=s) for s in range(n)]


def test_smoke_cases_run_first_and_drawn_cases_are_new_and_owned(stand_in):
    owned = lambda c: c.seed % 2 == 0  # noqa: E731 - this shard's share
    smoke = _smoke(3)
    search(_fakes.CORRECT, [], examples=5, seed=1, profile="dev", grads=False, smoke=smoke, owns=owned)
    cases = stand_in.cases
    assert cases[:2] == [smoke[0], smoke[2]]  # the owned smoke cases, first and in order
    assert len(cases) == 5 and len(set(cases)) == 5  # counted in `examples`; none drawn twice
    assert all(owned(c) for c in cases)
    stand_in.calls.clear()
    search(_fakes.CORRECT, [], examples=4, seed=1, profile="dev", grads=False, owns=owned)  # a shard, no smoke
    assert len(stand_in.cases) == 4 and all(owned(c) for c in stand_in.cases)


def test_a_shard_that_owns_no_pool_entry_draws_whole_cases(stand_in):
    # Shards own whole programs: with many shards one may own none of the pool's entries.
    entries = pool.draw_pool(_fakes.CORRECT, extra=pool.extra_entries(6), seed=pool.pool_seed(_fakes.CORRECT, 1))
    keys = {pool.program_key(e) for e in entries}
    not_in_pool = lambda c: pool.program_key(c) not in keys  # noqa: E731 - this shard's share
    outcome = search(_fakes.CORRECT, [], examples=6, seed=1, profile="dev", grads=False, owns=not_in_pool)
    assert len(outcome.results) == 6 and outcome.passed
    assert not keys & {pool.program_key(c) for c in stand_in.cases}


def test_drawn_cases_skip_the_smoke_case_hypothesis_would_draw_first(stand_in):
    first = search(_fakes.CORRECT, [], examples=1, profile="ci", grads=False).results[0].case
    stand_in.calls.clear()
    search(_fakes.CORRECT, [], examples=2, profile="ci", grads=False, smoke=[first])
    assert stand_in.cases[0] == first and len(stand_in.cases) == 2 and stand_in.cases[1] != first


def test_a_budget_the_smoke_set_fills_draws_nothing_more(stand_in):
    smoke = _smoke(3)
    outcome = search(_fakes.CORRECT, [], examples=2, seed=1, profile="dev", grads=False, smoke=smoke)
    assert stand_in.cases == smoke[:2]
    assert [r.case for r in outcome.results] == smoke[:2] and outcome.passed  # the outcome, not nothing
    stand_in.calls.clear()
    search(_fakes.CORRECT, [], examples=3, seed=1, profile="dev", grads=False, smoke=True)
    assert stand_in.cases == _smoke_set(_fakes.CORRECT)[:3]


def test_the_interpreter_options_reach_the_runner(stand_in, monkeypatch):
    seen = []
    run = lambda case, subj, **kw: seen.append(kw["interpret"]) or stand_in.run_case(case, subj, **kw)  # noqa: E731
    monkeypatch.setattr(harness_runner, "run_case", run)
    options = dataclasses.replace(DEFAULT_INTERPRET)
    search(_fakes.CORRECT, [], examples=2, seed=1, profile="dev", interpret=options)
    assert len(seen) == 2 and all(o is options for o in seen)


def test_the_interpreter_policy_reaches_the_runner_with_the_smoke_cases_marked(stand_in, monkeypatch):
    seen = []
    run = lambda case, subj, **kw: seen.append((case, kw["policy"], kw["smoke"])) or stand_in.run_case(case, subj, **kw)  # noqa: E731
    monkeypatch.setattr(harness_runner, "run_case", run)
    smoke = _smoke(2)
    search(_fakes.CORRECT, [], examples=4, seed=1, profile="dev", grads=False, smoke=smoke, interpreters="fast")
    assert [(c in smoke, policy, marked) for c, policy, marked in seen] == [
        (True, "fast", True),
        (True, "fast", True),
        (False, "fast", False),
        (False, "fast", False),
    ]


@pytest.mark.parametrize("reuse", [True, False])
def test_a_passing_search_checks_as_many_distinct_cases_as_asked(stand_in, reuse):
    # Hypothesis counts a case drawn twice as two examples; from a pool of few programs the
    # same case comes again often enough that a search would check fewer cases than asked.
    outcome = search(_fakes.CORRECT, [], examples=40, seed=3, profile="dev", grads=False, reuse=reuse)
    assert len(outcome.results) == 40 == len(set(stand_in.cases)) and outcome.passed


def test_a_failure_is_reduced_to_its_trigger_and_one_bug_is_reported_once(stand_in):
    # Fails wherever the mask is causal, whatever else the case has: Hypothesis keeps the features of its
    # draw that it cannot take away, the feature reduction leaves out each one that the failure does not need.
    causal = _fakes.FakeKernel("tests._fakes:causal_bug", broken=lambda c: bool(c.mask.causal))
    outcome = search(causal, [], examples=20, seed=2, profile="dev", grads=False, smoke=True)
    assert len(outcome.failures) == 1, [str(f.case) for f in outcome.failures]
    (stats,) = outcome.shrinks
    trigger = {f.partition(":")[0] for f in stats.trigger}
    assert trigger == {"mask"} and all(f.startswith("mask:causal") for f in stats.trigger), stats.trigger
    assert stats.needs == stats.trigger
    assert signatures.plain(causal) >= features.of(outcome.failures[0].case, causal) - set(stats.trigger)


def test_a_failure_whose_shrink_spent_the_budget_is_still_reduced_to_its_trigger(stand_in):
    # Hypothesis spends the 5 runs this failure may shrink with; the trigger search has half as many more,
    # enough here: before, a failure whose shrink spent the budget was never reduced (the planted paged page-table
    # bug's key-length failure, at the ci profile's 20 runs, was a second file).
    causal = _fakes.FakeKernel("tests._fakes:causal_bug", broken=lambda c: bool(c.mask.causal))
    outcome = search(causal, [], examples=20, seed=2, profile="dev", grads=False, shrink_runs=5, reuse=False)
    (stats,) = outcome.shrinks
    assert stats.exhausted and stats.trigger == ("mask:causal_top_left",)
    assert 5 < outcome.shrink_runs <= 5 + 5 // search_module.TRIGGER_SHARE


class _TwoWays(_fakes.FakeKernel):
    """Wrong values at head_dim 64 with a bias (its `broken`); at head_dim 64 without one, it raises: a second bug
    that a search meets first as the trigger search's candidate without the bias."""

    def run(self, case, inputs, *, grads):
        if case.head_dim == 64 and not case.bias:
            raise ValueError("planted: head_dim 64 without a bias")
        return super().run(case, inputs, grads=grads)


def test_a_failure_met_only_in_another_failures_trigger_search_is_reduced_too():
    # The one smoke case fails with a bias; left out, the case raises (another bug, never drawn: the budget is one
    # case). Before, that second bug was reported as found, unshrunk (the planted splash_soft_cap_after_mask, met
    # only in the trigger search of upstream splash's backward NaN: two files for it).
    kernel = _TwoWays("tests._fakes:two_ways", broken=lambda c: c.head_dim == 64 and c.bias)
    first = _fakes.small_case(q_len=32, bias=True)
    outcome = search(kernel, [], examples=1, profile="ci", grads=False, smoke=[first], reuse=False, shrink_runs=10)
    assert len(outcome.failures) == 2 and all(s.shrunk for s in outcome.shrinks), outcome.shrinks
    wrong, raises = outcome.shrinks
    assert wrong.trigger == ("mask:bias",) and "mask:bias" in wrong.otherwise  # without it, it raises
    assert raises.trigger == () and outcome.failures[1].subjects[0].error.startswith("ValueError")
