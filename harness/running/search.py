"""Step one of the pipeline: Hypothesis draws cases for one kernel and shrinks any failure.

Every generated case is handed to `on_result` as it finishes. Cases tried while
shrinking are not; the minimal failing case is returned separately. Shrinking runs
within the profile's shrink budget (harness.core.profiles): past it, candidates are not run
and count as passing, so Hypothesis stops at the smallest failure found so far.

Only a kernel's verdict steers Hypothesis. Any other exception inside a case (the store
cannot be written, the truth cannot be computed) stops the search at once and is raised
from `search` as it was: it is the harness's failure, never a flaky kernel.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import hypothesis
import jax
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from harness.core import compat, pool, profiles, strategies
from harness.core.case import Case
from harness.core.compat import DEFAULT_INTERPRET, InterpretOptions
from harness.core.contract import Implementation
from harness.core.smoke import iter_smoke_cases
from harness.running import runner
from harness.running.execute import is_interrupt
from harness.running.runner import CaseResult


def _release_freed_memory() -> None:
    """Hand memory freed by the last case back to the system (glibc's malloc_trim; elsewhere a no-op).

    Each case frees arrays of a different size; glibc keeps the freed pages in its heaps,
    and the run's resident size crept up ~15 MB a case with the caches cleared (measured,
    benchmarks/results/peak_rss.json).
    """
    try:
        _libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL("libc.so.6")


# Compiled kernel programs kept at once (see _run_case), at least: a run's pool is its smoke
# cases (5 for pallas_flash) plus harness.core.pool.extra_entries, 2 for a 20-case ci run.
LIVE_PROGRAMS = 8


class CaseFailed(AssertionError):
    """Raised inside the Hypothesis test so that it shrinks the case."""


class _HarnessError(BaseException):
    """Carries a harness error out of the Hypothesis test.

    A BaseException, because Hypothesis shrinks and replays on any Exception: a disk error
    would come back as "flaky failure" blamed on the kernel.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class _Enough(BaseException):
    """Stops Hypothesis once the search has checked its budget of distinct cases.

    Hypothesis counts a case drawn twice as two examples, and from a pool of a few programs
    the same case comes again often (51 distinct cases in 60 examples, measured for
    pallas_flash, with issue17c's first pool): it is asked for up to DRAWS_PER_CASE examples per
    case and stopped here.
    """


DRAWS_PER_CASE = 2

# With a pool (search's reuse), one in FRESH_ONE_IN drawn cases is drawn whole, the last ones, after
# those from the pool, so that new programs keep coming; a failure among them shrinks as a whole case.
FRESH_ONE_IN = 16


@dataclasses.dataclass(kw_only=True)
class SearchOutcome:
    kernel: str
    results: list[CaseResult]  # every generated case, in order
    shrunk: CaseResult | None = None  # the minimal failing case, if any
    interrupted: bool = False
    error: str | None = None  # a harness error that stopped the search
    first_failure_s: float | None = None  # seconds from the start to the first failing case
    shrink_runs: int = 0  # cases run while shrinking
    shrink_exhausted: bool = False  # the shrink budget ran out before Hypothesis finished

    @property
    def passed(self) -> bool:
        return self.shrunk is None and self.error is None and all(r.passed for r in self.results)


def _run_case(
    case: Case,
    subjects: list[Implementation],
    state: dict,
    *,
    grads: bool,
    time_limit: float | None,
    interpret: InterpretOptions,
    policy: str | None = None,
    smoke: bool = False,
) -> CaseResult:
    """runner.run_case, with JAX's caches cleared past a bound on the programs held, and errors sorted.

    An interrupt however it arrived is raised as KeyboardInterrupt; any other exception is
    the harness's (the kernels' own exceptions are results, caught in harness.running.execute).
    """
    program = pool.program_key(case)  # what compiled code depends on
    live = state["programs"]
    if program not in live:
        # JAX keeps every compiled executable (30-60 MiB each for pallas_flash under the
        # interpreter, measured) until its caches are cleared: cleared when a new program
        # would make more than LIVE_PROGRAMS, so a run's memory stays bounded
        # (benchmarks/peak_rss.py) while cases from the run's pool reuse their programs; a pool
        # of more programs than that (splash's 12 smoke cases) raises the bound to hold it whole.
        if len(live) >= state.get("live_programs", LIVE_PROGRAMS):
            jax.clear_caches()
            live.clear()
        live.add(program)
    try:
        return runner.run_case(
            case, subjects, grads=grads, time_limit=time_limit, interpret=interpret, policy=policy, smoke=smoke
        )
    except Exception as e:  # noqa: BLE001 - sorted into an interrupt or a harness error
        if is_interrupt(e):
            raise KeyboardInterrupt(str(e)) from e
        raise _HarnessError(e) from e
    finally:
        _release_freed_memory()


def _interrupts_as_themselves(test: Callable[[], None]) -> None:
    """Run the Hypothesis test; an interrupt that Hypothesis turned into another error is raised as itself.

    An interrupt landing while Hypothesis sets a test up (reading its source, right after the
    smoke cases) comes out as an AssertionError from Hypothesis's own clean-up, with the
    KeyboardInterrupt as its context: the run must stop as interrupted, not as a harness crash.
    """
    try:
        test()
    except (_Enough, _HarnessError, CaseFailed, KeyboardInterrupt, hypothesis.errors.Flaky):
        raise
    except Exception as e:
        if is_interrupt(e):
            raise KeyboardInterrupt(str(e)) from e
        raise


def _harness_errors(on_result: Callable[[CaseResult], None]) -> Callable[[CaseResult], None]:
    """`on_result` with its exceptions (a record that cannot be written) carried out as harness errors."""

    def guarded(result: CaseResult) -> None:
        try:
            on_result(result)
        except Exception as e:  # noqa: BLE001 - the harness's failure, never the kernel's
            raise _HarnessError(e) from e

    return guarded


def search(
    kernel: Implementation,
    oracles: list[Implementation],
    *,
    examples: int | None = None,
    seed: int | None = None,
    profile: str | None = None,
    database: Path | None = None,
    grads: bool = True,
    time_limit: float | None = None,
    interpret: InterpretOptions = DEFAULT_INTERPRET,
    interpreters: str | None = None,
    shrink_runs: int | None = None,
    smoke: bool | Sequence[Case] = False,
    reuse: bool = True,
    owns: Callable[[Case], bool] | None = None,
    on_result: Callable[[CaseResult], None] = lambda r: None,
) -> SearchOutcome:
    """Draw cases inside `kernel`'s contract and run each through the kernel and `oracles`.

    database: the example database directory; ignored by derandomized profiles (ci).
    time_limit: per-subject seconds, interpret: the interpreter's options, interpreters: which interpreters
    run a Pallas TPU kernel (runner.INTERPRETER_POLICIES; smoke cases are marked as such; see runner.run_case).
    shrink_runs overrides the profile's shrink budget in cases. smoke: start with the kernel's
    smoke cases (harness.core.smoke; or these cases, a shard's share of them), counted in `examples`;
    a failing smoke case is reported as it is (it is already the smallest case with its
    features) and the search stops there. reuse: drawn cases take their compile-relevant part
    from a pool drawn for this run (harness.core.pool), so compiled programs serve several cases.
    owns: only cases it is true of are drawn and checked (a shard's part of the search,
    harness.running.shards).
    """
    compat.enable_compilation_cache()
    outcome = SearchOutcome(kernel=kernel.name, results=[])
    subjects = [kernel, *oracles]
    budget = profiles.shrink_budget(profile)
    max_shrinks = budget.runs if shrink_runs is None else shrink_runs
    # Hypothesis may reach one case through several choice sequences, and replays the
    # minimal one at the end; a case's result is deterministic, so each runs once.
    seen: dict[Case, CaseResult] = {}
    state: dict = {"failing_since": None, "best": None, "programs": set()}
    started = time.perf_counter()

    # `check`'s source is kept as it was: under a derandomized profile Hypothesis seeds its
    # draws from a digest of the test function's source, and the planted-bug detection
    # figures were measured on that draw. The two names it calls are wrapped here instead.
    on_result = _harness_errors(on_result)

    def run_case(case: Case, subjects: list[Implementation], *, grads: bool, time_limit: float | None) -> CaseResult:
        if state["failing_since"] is None and len(outcome.results) >= state["budget"]:
            raise _Enough  # a new case past the budget: the search is done
        return _run_case(
            case,
            subjects,
            state,
            grads=grads,
            time_limit=time_limit,
            interpret=interpret,
            policy=interpreters,
            smoke=case in smoke_set,
        )

    def check(case: Case) -> None:
        result = seen.get(case)
        if result is None:
            if state["failing_since"] is not None:
                over_time = time.perf_counter() - state["failing_since"] > budget.seconds
                if outcome.shrink_runs >= max_shrinks or over_time:
                    outcome.shrink_exhausted = True
                    return  # not run: counts as passing, so shrinking settles on the best so far
                outcome.shrink_runs += 1
            result = seen[case] = run_case(case, subjects, grads=grads, time_limit=time_limit)
            generated = state["failing_since"] is None
            if generated:
                outcome.results.append(result)
            if not result.passed:
                # The shrinker only tries candidates smaller than the current minimum, so
                # every failure it reports is the new best.
                state["best"] = result
                if generated:
                    state["failing_since"] = time.perf_counter()
                    outcome.first_failure_s = state["failing_since"] - started
            if generated:
                on_result(result)  # after the bookkeeping: an interrupt here loses nothing
        if not result.passed:
            state["best"] = result
            raise CaseFailed(str(case))

    base = profiles.get(profile)
    budget_cases = base.max_examples if examples is None else examples
    smoke_set: list[Case] = []  # the smoke cases this search checks
    all_smoke: list[Case] = []  # every shard's: the pool starts from them
    state["budget"] = budget_cases

    def drawn_test(drawn: st.SearchStrategy[Case], digest: bytes, examples: int) -> Callable[[], None]:
        overrides: dict = {"max_examples": max(examples, 1) * DRAWS_PER_CASE}
        if seed is not None:
            overrides["derandomize"] = False
        derandomized = base.derandomize and seed is None
        if database and not derandomized:
            overrides["database"] = DirectoryBasedExampleDatabase(str(database))
        else:
            overrides["database"] = None
        if owns is not None or smoke_set:
            # Drawn cases are new ones: not another shard's, and not a smoke case already checked.
            smoked = set(smoke_set)
            drawn = drawn.filter(lambda c: c not in smoked and (owns is None or owns(c)))
        test = settings(base, **overrides)(given(drawn)(check))
        # Each kernel (and each phase) gets its own key in the example database and its own derandomized draw.
        test.hypothesis.inner_test._hypothesis_internal_add_digest = digest
        if seed is not None:
            test = hypothesis.seed(seed)(test)
        return test

    def drawn_phases() -> Iterator[tuple[st.SearchStrategy[Case], bytes, int]]:
        """(strategy, digest, the run's case count when it is done) for each phase after the smoke cases."""
        name = kernel.name.encode()
        if not reuse:
            yield strategies.cases(kernel), name, budget_cases
            return
        # Drawn after the smoke cases (a failing one ends the search first), with every shard's smoke cases:
        # their programs are the run's most common ones. From the seed and the budget alone, so a shard
        # draws the same pool every time.
        extra = pool.extra_entries(budget_cases)
        # The smoke cases' skeletons are in the pool whether or not they were checked first: without
        # them a pool of a few extra entries can miss a whole feature (a tiling class) that 20 whole
        # draws would meet (tests/test_planted.py, fwd_v_offset_minor_blocks without smoke cases).
        skeletons_of = all_smoke if smoke else list(iter_smoke_cases(kernel))
        skeletons = pool.draw_pool(kernel, extra=extra, seed=pool.pool_seed(kernel, seed), smoke=skeletons_of)
        # A shard owns whole programs (harness.running.shards): its own entries, if any.
        skeletons = tuple(e for e in skeletons if owns is None or owns(e))
        left = budget_cases - len(outcome.results)
        if skeletons:
            yield strategies.cases(kernel, pool=skeletons), name, budget_cases - left // FRESH_ONE_IN
        yield strategies.cases(kernel), name + b"/fresh", budget_cases

    # Smoke cases one at a time (iter_smoke_cases): a failing one stops the search before the
    # rest are even looked for.
    smoke_iter = iter_smoke_cases(kernel) if smoke is True else iter(smoke or [])
    try:
        for case in smoke_iter:
            if len(smoke_set) >= budget_cases:
                break
            all_smoke.append(case)
            # The run's pool: its smoke cases' programs and the extra entries (pool.draw_pool).
            state["live_programs"] = max(LIVE_PROGRAMS, len(all_smoke) + pool.extra_entries(budget_cases) + 1)
            if owns is None or owns(case):
                smoke_set.append(case)
                check(case)
        if budget_cases > len(smoke_set):
            for drawn, digest, until in drawn_phases():
                state["budget"] = until
                if until > len(outcome.results):
                    try:
                        _interrupts_as_themselves(drawn_test(drawn, digest, until - len(outcome.results)))
                    except _Enough:
                        pass
    except _HarnessError as e:
        raise e.error from None
    except CaseFailed:
        outcome.shrunk = state["best"]
    except KeyboardInterrupt:
        # Keep the smallest failure found before the interrupt: it is a real one.
        outcome.interrupted = True
        outcome.shrunk = state["best"]
    except hypothesis.errors.Flaky as e:
        outcome.shrunk = state["best"]
        outcome.error = f"flaky failure (did not reproduce on replay): {str(e).splitlines()[0]}"
    return outcome
