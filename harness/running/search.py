"""Step one of the pipeline: Hypothesis draws cases for one kernel and shrinks each distinct failure.

Every generated case is handed to `on_result` as it finishes. Cases tried while
shrinking are not; the failures, one per signature (harness.running.signatures), each
shrunk, are returned separately. Hypothesis stops a test at its first failure, so a search
shrinks a new failure at once (candidates that fail another way count as passing), then draws
again from the start: the cases checked already are free, the failure is explained now, and
the draw goes on past it. Each shrink runs within the profile's shrink budget
(harness.core.profiles): past it, candidates are not run and count as passing, so Hypothesis
stops at the smallest failure found so far.

Only a kernel's verdict steers Hypothesis. Any other exception inside a case (the store
cannot be written, the truth cannot be computed) stops the search at once and is raised
from `search` as it was: it is the harness's failure, never a flaky kernel.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import functools
import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import hypothesis
import jax
from hypothesis import Verbosity, given, settings
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase

from harness.core import pool, profiles, strategies
from harness.core.case import Case
from harness.core.contract import Implementation
from harness.core.smoke import iter_smoke_cases
from harness.running import database as examples_database
from harness.running import runner, signatures, trigger
from harness.running.distinct import Failures, Shrink, ShrinkStats
from harness.running.execute import is_interrupt
from harness.running.runner import CaseResult
from harness.runtime import compat
from harness.runtime.compat import DEFAULT_INTERPRET, InterpretOptions


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


# Compiled kernel programs kept at once (see _run_case), at least; a kernel with more smoke
# cases (splash's 12) keeps those. The pool's entries take turns (_spent), so a program comes
# back only after every other entry has had its case: keeping more would hold memory for nothing.
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
# Draws per case from the pool, where a draw whose program has had its turn is passed over (_spent):
# Hypothesis's draws repeat entries, and the last unused entries of a large pool take many draws to
# meet (a draw costs milliseconds, a case a CPU second).
POOL_DRAWS_PER_CASE = 16

# With a pool (search's reuse), one in FRESH_ONE_IN drawn cases is drawn whole, the last ones, after
# those from the pool, so that new programs keep coming; a failure among them shrinks as a whole case.
FRESH_ONE_IN = 16

# The trigger search (harness.running.trigger) may run past a failure's shrink budget by half of it: a failure
# whose Hypothesis shrink spent the budget (the planted paged page-table bug's key lengths, at the ci profile's
# 20 runs) is still reduced to its trigger; a smoke case of eight features (planted splash_soft_cap_after_mask)
# took 21 runs of trigger search from its own case, measured.
TRIGGER_SHARE = 2

# Distinct failures one search shrinks, each within the profile's shrink budget; any met past
# them are reported as found, each still with its own failure file: a kernel broken everywhere
# should not spend a run shrinking.
MAX_SHRUNK = 6


@dataclasses.dataclass(kw_only=True)
class SearchOutcome:
    kernel: str
    results: list[CaseResult]  # every generated case, in order
    # One failure per distinct signature (harness.running.signatures), shrunk, in the order found;
    # shrinks[i] says how failures[i] was shrunk.
    failures: list[CaseResult] = dataclasses.field(default_factory=list)
    shrinks: list[ShrinkStats] = dataclasses.field(default_factory=list)
    interrupted: bool = False
    error: str | None = None  # a harness error that stopped the search
    first_failure_s: float | None = None  # seconds from the start to the first failing case
    shrink_runs: int = 0  # cases run while shrinking, all failures together
    shrink_exhausted: bool = False  # the shrink budget ran out before Hypothesis finished, for some failure

    @property
    def shrunk(self) -> CaseResult | None:
        """The first failure found, shrunk; None if none."""
        return self.failures[0] if self.failures else None

    @property
    def passed(self) -> bool:
        return not self.failures and self.error is None and all(r.passed for r in self.results)


class _KeptDatabase(ExampleDatabase):
    """An example database that Hypothesis reads and adds to but never deletes from.

    A search restarted after shrinking a failure replays the database first; a saved failure its
    search has already reported now counts as passing, and Hypothesis would delete it: the next
    run could no longer replay it first.
    """

    def __init__(self, inner: ExampleDatabase) -> None:
        super().__init__()
        self.inner = inner

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(key)

    def delete(self, key: bytes, value: bytes) -> None:
        pass

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.save(dest, value)


def _run_case(
    case: Case, check: runner.Check, live: set[Case], bound: int, *, policy: str | None = None, smoke: bool = False
) -> CaseResult:
    """`check` run on `case` (runner.Check.run), with JAX's caches cleared past `bound` programs held (`live`), and
    errors sorted.

    An interrupt however it arrived is raised as KeyboardInterrupt; any other exception is
    the harness's (the kernels' own exceptions are results, caught in harness.running.execute).
    """
    program = pool.program_key(case)  # what compiled code depends on
    if program not in live:
        # JAX keeps every compiled executable (30-60 MiB each for pallas_flash under the
        # interpreter, measured) until its caches are cleared: cleared when a new program
        # would make more than `bound` (LIVE_PROGRAMS), so a run's memory stays bounded
        # (benchmarks/peak_rss.py) while cases from the run's pool reuse their programs; a pool
        # of more programs than that (splash's 12 smoke cases) raises the bound to hold it whole.
        if len(live) >= bound:
            jax.clear_caches()
            live.clear()
        live.add(program)
    try:
        return check.run(case, policy=policy, smoke=smoke)
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Phase:
    """One Hypothesis phase of a search after the smoke cases: what it draws, until the run has how many cases."""

    name: str  # "pool" or "whole": its part of the derandomized seed (phase_seed)
    key: bytes  # its key in the example database, as earlier releases saved it
    drawn: st.SearchStrategy[Case]
    until: int
    entries: frozenset[Case] | None = None  # the programs of the pool it draws from; None for whole cases


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How one kernel's search runs (what it runs each case with is its runner.Check).

    examples: distinct cases checked, smoke cases among them (None: the profile's). seed: the draw's seed (None: the
    profile's, derandomized under ci). database: the example database directory, shared_database one beside it
    (harness.running.database), both ignored by seeded and derandomized draws. interpreters: which interpreters run
    a Pallas TPU kernel (runner.INTERPRETER_POLICIES; smoke cases are marked as such; see runner.run_case).
    shrink_runs overrides the profile's shrink budget in cases, per failure. smoke: start with the kernel's smoke
    cases (harness.core.smoke; or these cases, a shard's share of them), counted in `examples`. reuse: drawn cases
    take their compile-relevant part from a pool drawn for this run (harness.core.pool), so compiled programs serve
    several cases. owns: only cases it is true of are drawn and checked (a shard's part of the search,
    harness.running.jobs). first_failure: stop at the first failure, shrunk (any failure met while shrinking counts).
    """

    examples: int | None = None
    seed: int | None = None
    profile: str | None = None
    database: Path | None = None
    shared_database: examples_database.Shared | None = None
    interpreters: str | None = None
    shrink_runs: int | None = None
    smoke: bool | Sequence[Case] = False
    reuse: bool = True
    owns: Callable[[Case], bool] | None = None
    first_failure: bool = False


def search(
    kernel: Implementation,
    oracles: list[Implementation],
    *,
    grads: bool = True,
    time_limit: float | None = None,
    interpret: InterpretOptions = DEFAULT_INTERPRET,
    on_result: Callable[[CaseResult], None] = lambda r: None,
    **options: Any,
) -> SearchOutcome:
    """Draw cases inside `kernel`'s contract and run each through the kernel and `oracles`: one Search of their
    runner.Check, its options (SearchOptions) given as keywords. Every generated case goes to `on_result` as it
    finishes."""
    check = runner.Check(kernel=kernel, oracles=oracles, grads=grads, time_limit=time_limit, interpret=interpret)
    return Search(check, SearchOptions(**options), on_result=on_result).run()


class Search:
    """One kernel's search, read top to bottom: the smoke cases, then the drawn phases (the run's pool of
    programs, then whole cases); each failure shrunk by Hypothesis, then reduced over its features to its
    trigger (reduce_features), then kept once per distinct bug (harness.running.distinct).

    The search goes on after a failure: each failure that no failure found before explains
    (harness.running.signatures) is shrunk, up to MAX_SHRUNK of them, and reported once. Each phase's draw
    is seeded from the run's seed (or, derandomized, the kernel's name) and the phase's name alone.
    """

    def __init__(
        self, check: runner.Check, options: SearchOptions, *, on_result: Callable[[CaseResult], None] = lambda r: None
    ) -> None:
        o = options
        kernel = self.kernel = check.kernel
        self.options = o
        self.runs_with = check  # the kernel, its oracles and how each case runs
        self.run_case = functools.partial(_run_case, policy=o.interpreters)
        self.profile = profiles.get(o.profile)
        self.shrink_budget = profiles.shrink_budget(o.profile)
        self.budget = self.profile.max_examples if o.examples is None else o.examples  # smoke cases among them
        self.max_shrinks = self.shrink_budget.runs if o.shrink_runs is None else o.shrink_runs
        self.on_result = _harness_errors(on_result)
        self.outcome = SearchOutcome(kernel=kernel.name, results=[])
        self.failures = Failures(kernel, self.outcome, first_only=o.first_failure, cap=MAX_SHRUNK)
        self.started = time.perf_counter()
        # Hypothesis may reach one case through several choice sequences, and replays the
        # minimal one at the end; a case's result is deterministic, so each runs once.
        self.seen: dict[Case, CaseResult] = {}
        self.generated: set[Case] = set()  # the cases in outcome.results
        self.uses: collections.Counter[Case] = collections.Counter()  # cases per program
        self.programs: set[Case] = set()  # the programs JAX holds compiled now
        self.live_programs = LIVE_PROGRAMS  # the bound on those
        self.smoke: list[Case] = []  # the smoke cases this search checks
        self.all_smoke: list[Case] = []  # every shard's: the pool starts from them
        self.until = self.budget  # the case count the current phase stops at (the smoke cases': the budget)
        self.entries: frozenset[Case] | None = None  # the programs of the pool being drawn from (or None)
        self.shrink: Shrink | None = None  # the failure being shrunk

    def run(self) -> SearchOutcome:
        """The whole search: its outcome, interrupted or stopped by a flaky failure included."""
        compat.enable_compilation_cache()
        smoke = self.options.smoke
        # Smoke cases one at a time (iter_smoke_cases): a failing one stops a first-failure search
        # before the rest are even looked for.
        smoke_cases = iter_smoke_cases(self.kernel) if smoke is True else iter(smoke or [])
        try:
            if self.smoke_phase(smoke_cases) and self.budget > len(self.smoke):
                self.drawn_phases(smoked=smoke is not False)
            if not self.options.first_failure:
                self.reduce_met()
        except _HarnessError as e:
            raise e.error from None
        except KeyboardInterrupt:
            # Keep the smallest failure found before the interrupt: it is a real one.
            self.outcome.interrupted = True
            self.keep_shrinking()
        except hypothesis.errors.Flaky as e:
            self.keep_shrinking()
            self.outcome.error = f"flaky failure (did not reproduce on replay): {str(e).splitlines()[0]}"
        self.failures.settle_met()
        return self.outcome

    # -- the smoke cases --------------------------------------------------------------------------------

    def smoke_phase(self, cases: Iterator[Case]) -> bool:
        """Check the smoke cases this search owns, within its budget; False: stop the search (a first failure)."""
        for case in cases:
            if len(self.smoke) >= self.budget:
                break
            self.all_smoke.append(case)
            # The run's pool: its smoke cases' programs and the extra entries (pool.draw_pool).
            self.live_programs = max(LIVE_PROGRAMS, len(self.all_smoke) + 1)
            if self.options.owns is None or self.options.owns(case):
                self.smoke.append(case)
                if not self.check_smoke(case):
                    return False
        return True

    def check_smoke(self, case: Case) -> bool:
        """A smoke case checked; False: stop the search (its failure, with first_failure)."""
        try:
            self.check(case)
        except CaseFailed:
            self.finish_failure()
            return not self.options.first_failure
        return True

    # -- the drawn phases -------------------------------------------------------------------------------

    def drawn_phases(self, *, smoked: bool) -> None:
        """The phases after the smoke cases, each run until the search has its cases or is stopped."""
        reuse = self.options.reuse
        phases = [self.pool_phase(smoked=smoked)] if reuse else []
        key = self.kernel.name.encode() + (b"/fresh" if reuse else b"")
        phases.append(_Phase(name="whole", key=key, drawn=strategies.cases(self.kernel), until=self.budget))
        for phase in phases:
            if phase is not None and phase.until > len(self.outcome.results) and not self.run_phase(phase):
                break

    def pool_phase(self, *, smoked: bool) -> _Phase | None:
        """Cases drawn from the run's pool of programs, until all but one in FRESH_ONE_IN of the budget
        left; None where the pool is empty (a shard that owns none of its programs)."""
        # Drawn after the smoke cases, with every shard's smoke cases: their programs are the run's
        # most common ones. From the seed and the budget alone, so a shard draws the same pool every time.
        extra = pool.extra_entries(self.budget)
        # The smoke cases' skeletons are in the pool whether or not they were checked first: without
        # them a pool of a few extra entries can miss a whole feature (a tiling class) that 20 whole
        # draws would meet (tests/test_planted.py, fwd_v_offset_minor_blocks without smoke cases).
        skeletons_of = self.all_smoke if smoked else list(iter_smoke_cases(self.kernel))
        # A shard owns whole programs (harness.running.jobs): its pool is drawn from them alone.
        pool_seed = pool.pool_seed(self.kernel, self.options.seed)
        try:
            skeletons = pool.draw_pool(
                self.kernel, extra=extra, seed=pool_seed, smoke=skeletons_of, owns=self.options.owns
            )
        except Exception as e:
            # Ctrl-C inside the pool's own Hypothesis draws comes out of Hypothesis's clean-up as an AssertionError.
            if is_interrupt(e):
                raise KeyboardInterrupt(str(e)) from e
            raise
        if not skeletons:
            return None
        left = self.budget - len(self.outcome.results)
        programs = frozenset(pool.program_key(e) for e in skeletons)
        drawn = strategies.cases(self.kernel, pool=skeletons)
        until = self.budget - left // FRESH_ONE_IN
        return _Phase(name="pool", key=self.kernel.name.encode(), drawn=drawn, until=until, entries=programs)

    def run_phase(self, phase: _Phase) -> bool:
        """Draw cases until the run has `phase.until`; after each failure shrunk, draw on. False: stop the search."""
        self.until, self.entries = phase.until, phase.entries
        examples = phase.until - len(self.outcome.results)
        restarted = False
        while phase.until > len(self.outcome.results):
            try:
                _interrupts_as_themselves(self.hypothesis_test(phase, examples, restarted=restarted))
                return True
            except _Enough:
                return True
            except CaseFailed:
                self.finish_failure()
                if self.options.first_failure:
                    return False
                # Drawn again from the start: the cases met so far are checked already (free), the
                # failures shrunk are explained now, so Hypothesis draws on past them.
                restarted = True
        return True

    def hypothesis_test(self, phase: _Phase, examples: int, *, restarted: bool) -> Callable[[], None]:
        """The Hypothesis test of one phase: up to `examples` new cases of `phase.drawn`."""
        draws = DRAWS_PER_CASE if phase.entries is None else POOL_DRAWS_PER_CASE
        # Quiet: the harness reports failures itself, and Hypothesis would tell a run that _Enough
        # ended how to reproduce "this failure".
        overrides: dict = {"max_examples": max(examples, 1) * draws, "verbosity": Verbosity.quiet}
        seed, database = self.options.seed, self.options.database
        if seed is not None:
            overrides["derandomize"] = False  # as --seed always ran: the seed's own draw
        seeded = seed is not None or self.profile.derandomize
        if database and not seeded:
            saved = examples_database.open_database(database, self.options.shared_database)
            overrides["database"] = _KeptDatabase(saved) if restarted else saved
        else:
            overrides["database"] = None
        drawn = phase.drawn
        if self.options.owns is not None or self.smoke:
            # Drawn cases are new ones: not another shard's, and not a smoke case already checked.
            smoked, owns = set(self.smoke), self.options.owns
            drawn = drawn.filter(lambda c: c not in smoked and (owns is None or owns(c)))

        def check(case: Case) -> None:
            self.check(case)

        test = settings(self.profile, **overrides)(given(drawn)(check))
        # Each kernel and each phase has its own key in the example database (an unseeded run's), with no path or
        # host in it (Hypothesis's digest of `check`, and phase.key): every runner of a fleet shares it.
        test.hypothesis.inner_test._hypothesis_internal_add_digest = phase.key
        if seeded:
            # A drop-in draws its upstream's cases (the same capabilities): a fork's run pairs case by case with
            # its upstream's (harness.gate.forks). The example database stays the fork's own (phase.key).
            drawn_as = self.kernel.drops_into or self.kernel.name
            test = hypothesis.seed(phase_seed(drawn_as, seed, phase.name))(test)
        return test

    # -- one case ---------------------------------------------------------------------------------------

    def check(self, case: Case) -> None:
        """Run one case Hypothesis drew (a case of the search, or a shrink candidate) and keep its verdict."""
        new = self.shrink is None and case not in self.generated  # a case of the search, not a shrink candidate
        if new and len(self.outcome.results) >= self.until:
            raise _Enough  # a new case past the budget: the search is done
        if new and self.spent(case):
            return  # passed over, not run: counts as passing
        result = self.seen.get(case) or self.run_new(case)
        if result is None:
            return
        if new:
            self.generated.add(case)
            self.uses[pool.program_key(case)] += 1
            self.outcome.results.append(result)
            if not result.passed and self.outcome.first_failure_s is None:
                self.outcome.first_failure_s = time.perf_counter() - self.started
        target = not result.passed and self.failures.is_target(result, self.shrink)
        if target:
            if self.shrink is None:
                self.shrink = Shrink(target=result, best=result, since=time.perf_counter())
            # The shrinker only tries candidates smaller than the current minimum, so
            # every failure it reports is the new best.
            self.shrink.best = result
        elif not result.passed:
            self.failures.note(result, self.shrink)
        if new:
            self.on_result(result)  # after the bookkeeping: an interrupt here loses nothing
        if target:
            raise CaseFailed(str(case))

    def spent(self, case: Case) -> bool:
        """Whether the case's program has had more cases than some pool entry: programs take turns."""
        return self.entries is not None and self.uses[pool.program_key(case)] > min(self.uses[e] for e in self.entries)

    def run_new(self, case: Case) -> CaseResult | None:
        """The case run, or None where the shrink budget is spent (a candidate not run counts as passing)."""
        shrink = self.shrink
        if shrink is not None:
            spent = time.perf_counter() - shrink.since > self.shrink_budget.seconds
            if shrink.runs >= self.max_shrinks + shrink.extra_runs or spent:
                shrink.exhausted = True
                return None
            shrink.runs += 1
            self.outcome.shrink_runs += 1
        result = self.seen[case] = self.run_case(
            case, self.runs_with, self.programs, self.live_programs, smoke=case in self.smoke
        )
        return result

    # -- a failure, once Hypothesis has shrunk it -------------------------------------------------------

    def finish_failure(self) -> None:
        """The failure Hypothesis shrank, reduced to its trigger and kept (harness.running.distinct)."""
        assert self.shrink is not None
        self.reduce_features()
        self.failures.finish(self.shrink)
        self.shrink = None

    def reduce_features(self) -> None:
        """The failure being shrunk reduced over its features, to its trigger (harness.running.trigger)."""
        shrink = self.shrink
        assert shrink is not None
        # Hypothesis's share of the budget spent: the trigger search still has its own (TRIGGER_SHARE), if any.
        hypothesis_spent, shrink.extra_runs = shrink.exhausted, self.max_shrinks // TRIGGER_SHARE
        shrink.exhausted = hypothesis_spent and not shrink.extra_runs
        reducing, verdict = trigger.reduce(shrink, self.kernel), None  # yields each candidate, is sent its verdict
        while True:
            try:
                candidate = reducing.send(verdict)
            except StopIteration:
                break
            verdict = self.reduction(candidate)
        shrink.exhausted |= hypothesis_spent

    def reduce_met(self) -> None:
        """Each failure met only while another was shrunk (a candidate that failed as another bug) that no failure
        reported since explains, reduced to its trigger as a failing smoke case is (never drawn, it has no
        Hypothesis shrink), within the cap of shrunk failures; before, it was reported as found, unshrunk (the
        planted splash_soft_cap_after_mask met only in the trigger search of splash's backward NaN: two files)."""
        while (met := self.failures.next_met()) is not None:
            self.shrink = Shrink(target=met, best=met, since=time.perf_counter())
            self.finish_failure()

    def reduction(self, candidate: Case) -> str:
        """A trigger search's candidate run (reduce_features): "alike" where it fails as the failure being shrunk,
        in its kind or as the same bug with another symptom (signatures.symptom: then the new best); "passed"
        where it passed (or was not run: the budget is spent); "otherwise" where it failed as another bug."""
        shrink = self.shrink
        assert shrink is not None
        try:
            self.check(candidate)
        except CaseFailed:
            return "alike"
        result = self.seen.get(candidate)
        if result is None or result.passed:
            return "passed"
        if signatures.symptom(result, shrink.best):
            shrink.best = result
            return "alike"
        return "otherwise"

    def keep_shrinking(self) -> None:
        """The failure being shrunk when the search stopped, reported as shrunk so far."""
        if self.shrink is not None:
            self.failures.finish(self.shrink)
            self.shrink = None


def phase_seed(kernel: str, seed: int | None, phase: str) -> int:
    """The seed of one phase's draw: the run's seed where one is given (every phase draws from it, as
    `--seed` always has), else (a derandomized profile) one from the kernel's name and the phase's alone,
    so that no edit of this module moves a derandomized draw."""
    if seed is not None:
        return seed
    return int(hashlib.sha256(f"{kernel}/{phase}".encode()).hexdigest()[:16], 16)
