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
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import hypothesis
import jax
from hypothesis import Verbosity, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from harness.core import compat, pool, profiles, strategies
from harness.core.case import Case
from harness.core.compat import DEFAULT_INTERPRET, InterpretOptions
from harness.core.contract import Implementation
from harness.core.smoke import iter_smoke_cases
from harness.running import runner, signatures
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

# Distinct failures one search shrinks, each within the profile's shrink budget; any met past
# them are reported as found, each still with its own failure file: a kernel broken everywhere
# should not spend a run shrinking.
MAX_SHRUNK = 6


@dataclasses.dataclass(frozen=True)
class ShrinkStats:
    """How one reported failure was shrunk."""

    runs: int = 0  # cases run while shrinking it
    exhausted: bool = False  # the shrink budget ran out before Hypothesis finished
    # False: reported as found (past MAX_SHRUNK, or met while shrinking another). A smoke case is
    # shrunk already: it is the smallest case with its features.
    shrunk: bool = True


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


@dataclasses.dataclass(kw_only=True)
class _Shrink:
    """The failure being shrunk: the first of its signature, the best so far, and its budget spent."""

    target: CaseResult
    best: CaseResult
    since: float
    runs: int = 0
    exhausted: bool = False


class _Failures:
    """The distinct failures of one search, and the failing cases they explain."""

    def __init__(self, impl: Implementation, outcome: SearchOutcome, *, first_only: bool) -> None:
        self.impl, self.outcome, self.first_only = impl, outcome, first_only
        self.known: list[signatures.Signature] = []  # of outcome.failures, index by index
        self.explained: set[Case] = set()
        self.met: list[CaseResult] = []  # met while shrinking another, not yet explained
        self.shrunk = 0  # failures shrunk, those replaced by a more general one too

    def explains(self, result: CaseResult) -> bool:
        if result.case in self.explained:
            return True
        known = zip(self.known, self.outcome.shrinks, strict=True)
        return any(signatures.explains(sig, result, self.impl, anywhere=not s.shrunk) for sig, s in known)

    def is_target(self, result: CaseResult, shrink: _Shrink | None) -> bool:
        """Whether failing `result` is shrunk: a new failure (generating), or one like the target (shrinking)."""
        if self.first_only:
            return True  # any failure, as a search that stops at its first
        if self.explains(result):
            return False
        if shrink is None:
            return self.shrunk < MAX_SHRUNK
        return signatures.same_kind(result, shrink.target)

    def note(self, result: CaseResult, shrink: _Shrink | None) -> None:
        """A failure that is not shrunk: reported as found when nothing explains it."""
        if self.explains(result):
            return
        if shrink is None:
            self.add(result, ShrinkStats(shrunk=False))
        else:
            self.met.append(result)

    def add(self, result: CaseResult, stats: ShrinkStats, tried: Sequence[Case] = ()) -> None:
        """Report `result`; it and the cases `tried` count as explained from now on."""
        sig = signatures.signature(result, self.impl)
        out = self.outcome
        gone: list[int] = []
        if stats.shrunk:
            # Shrunk to fewer features than a failure reported before, of the same kind: the same
            # bug, more generally (long keys fail at every query length, not only at unequal ones).
            # It takes the place of the first it replaces, so failures stay in the order found.
            gone = [i for i, f in enumerate(out.failures) if signatures.explains(sig, f, self.impl)]
            for i in reversed(gone[1:]):
                del out.failures[i], out.shrinks[i], self.known[i]
            if gone:
                out.failures[gone[0]], out.shrinks[gone[0]], self.known[gone[0]] = result, stats, sig
        if not stats.shrunk or not gone:
            out.failures.append(result)
            out.shrinks.append(stats)
            self.known.append(sig)
        out.shrink_exhausted |= stats.exhausted
        self.explained |= {result.case, *tried}

    def finish(self, shrink: _Shrink) -> None:
        self.shrunk += 1
        # The failing case drawn is explained (so that a search drawn again goes on past it), not every
        # candidate tried: a later shrink may need those on its way down.
        self.add(shrink.best, ShrinkStats(runs=shrink.runs, exhausted=shrink.exhausted), [shrink.target.case])

    def settle_met(self) -> None:
        for result in self.met:
            if not self.explains(result):
                self.add(result, ShrinkStats(shrunk=False))
        self.met.clear()


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
    first_failure: bool = False,
    on_result: Callable[[CaseResult], None] = lambda r: None,
) -> SearchOutcome:
    """Draw cases inside `kernel`'s contract and run each through the kernel and `oracles`.

    database: the example database directory; ignored by derandomized profiles (ci).
    time_limit: per-subject seconds, interpret: the interpreter's options, interpreters: which interpreters
    run a Pallas TPU kernel (runner.INTERPRETER_POLICIES; smoke cases are marked as such; see runner.run_case).
    shrink_runs overrides the profile's shrink budget in cases, per failure. smoke: start with
    the kernel's smoke cases (harness.core.smoke; or these cases, a shard's share of them), counted
    in `examples`; a failing smoke case is reported as it is (it is already the smallest case with
    its features). reuse: drawn cases take their compile-relevant part from a pool drawn for this
    run (harness.core.pool), so compiled programs serve several cases. owns: only cases it is true
    of are drawn and checked (a shard's part of the search, harness.running.shards).

    The search goes on after a failure: each failure that no failure found before explains
    (harness.running.signatures) is shrunk, up to MAX_SHRUNK of them, and reported once.
    first_failure: stop at the first failure, shrunk (any failure met while shrinking counts).
    """
    compat.enable_compilation_cache()
    outcome = SearchOutcome(kernel=kernel.name, results=[])
    subjects = [kernel, *oracles]
    budget = profiles.shrink_budget(profile)
    max_shrinks = budget.runs if shrink_runs is None else shrink_runs
    failures = _Failures(kernel, outcome, first_only=first_failure)
    # Hypothesis may reach one case through several choice sequences, and replays the
    # minimal one at the end; a case's result is deterministic, so each runs once.
    seen: dict[Case, CaseResult] = {}
    generated: set[Case] = set()  # the cases in outcome.results
    # uses: cases checked per program; entries: the programs of the pool being drawn from (or None).
    state: dict = {"shrink": None, "programs": set(), "uses": collections.Counter(), "entries": None}
    started = time.perf_counter()
    on_result = _harness_errors(on_result)

    def run_new(case: Case) -> CaseResult | None:
        """The case run, or None where the shrink budget is spent (a candidate not run counts as passing)."""
        shrink: _Shrink | None = state["shrink"]
        if shrink is not None:
            if shrink.runs >= max_shrinks or time.perf_counter() - shrink.since > budget.seconds:
                shrink.exhausted = True
                return None
            shrink.runs += 1
            outcome.shrink_runs += 1
        result = seen[case] = _run_case(
            case,
            subjects,
            state,
            grads=grads,
            time_limit=time_limit,
            interpret=interpret,
            policy=interpreters,
            smoke=case in smoke_set,
        )
        return result

    def spent(case: Case) -> bool:
        """Whether the case's program has had more cases than some pool entry: programs take turns."""
        entries, uses = state["entries"], state["uses"]
        return entries is not None and uses[pool.program_key(case)] > min(uses[e] for e in entries)

    def check_case(case: Case) -> None:
        shrink: _Shrink | None = state["shrink"]
        new = shrink is None and case not in generated  # a case of the search, not a shrink candidate
        if new and len(outcome.results) >= state["budget"]:
            raise _Enough  # a new case past the budget: the search is done
        if new and spent(case):
            return  # passed over, not run: counts as passing
        result = seen.get(case) or run_new(case)
        if result is None:
            return
        if new:
            generated.add(case)
            state["uses"][pool.program_key(case)] += 1
            outcome.results.append(result)
            if not result.passed and outcome.first_failure_s is None:
                outcome.first_failure_s = time.perf_counter() - started
        target = not result.passed and failures.is_target(result, shrink)
        if target:
            if shrink is None:
                shrink = state["shrink"] = _Shrink(target=result, best=result, since=time.perf_counter())
            # The shrinker only tries candidates smaller than the current minimum, so
            # every failure it reports is the new best.
            shrink.best = result
        elif not result.passed:
            failures.note(result, shrink)
        if new:
            on_result(result)  # after the bookkeeping: an interrupt here loses nothing
        if target:
            raise CaseFailed(str(case))

    # `check`'s source stays as it is: under a derandomized profile Hypothesis seeds its draws from
    # a digest of the test function's source, so the draw does not move when check_case changes.
    def check(case: Case) -> None:
        check_case(case)

    base = profiles.get(profile)
    budget_cases = base.max_examples if examples is None else examples
    smoke_set: list[Case] = []  # the smoke cases this search checks
    all_smoke: list[Case] = []  # every shard's: the pool starts from them
    state["budget"] = budget_cases

    def drawn_test(
        drawn: st.SearchStrategy[Case], digest: bytes, examples: int, *, restarted: bool
    ) -> Callable[[], None]:
        draws = DRAWS_PER_CASE if state["entries"] is None else POOL_DRAWS_PER_CASE
        # Quiet: the harness reports failures itself, and Hypothesis would tell a run that _Enough
        # ended how to reproduce "this failure".
        overrides: dict = {"max_examples": max(examples, 1) * draws, "verbosity": Verbosity.quiet}
        if seed is not None:
            overrides["derandomize"] = False
        derandomized = base.derandomize and seed is None
        if database and not derandomized:
            saved = DirectoryBasedExampleDatabase(str(database))
            overrides["database"] = _KeptDatabase(saved) if restarted else saved
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

    def drawn_phases() -> Iterator[tuple[st.SearchStrategy[Case], bytes, int, frozenset[Case] | None]]:
        """(strategy, digest, the run's case count when it is done, the pool's programs or None) for
        each phase after the smoke cases."""
        name = kernel.name.encode()
        if not reuse:
            yield strategies.cases(kernel), name, budget_cases, None
            return
        # Drawn after the smoke cases, with every shard's smoke cases: their programs are the run's
        # most common ones. From the seed and the budget alone, so a shard draws the same pool every time.
        extra = pool.extra_entries(budget_cases)
        # The smoke cases' skeletons are in the pool whether or not they were checked first: without
        # them a pool of a few extra entries can miss a whole feature (a tiling class) that 20 whole
        # draws would meet (tests/test_planted.py, fwd_v_offset_minor_blocks without smoke cases).
        skeletons_of = all_smoke if smoke else list(iter_smoke_cases(kernel))
        # A shard owns whole programs (harness.running.shards): its pool is drawn from them alone.
        pool_seed = pool.pool_seed(kernel, seed)
        try:
            skeletons = pool.draw_pool(kernel, extra=extra, seed=pool_seed, smoke=skeletons_of, owns=owns)
        except Exception as e:
            # Ctrl-C inside the pool's own Hypothesis draws comes out of Hypothesis's clean-up as an AssertionError.
            if is_interrupt(e):
                raise KeyboardInterrupt(str(e)) from e
            raise
        left = budget_cases - len(outcome.results)
        if skeletons:
            programs = frozenset(pool.program_key(e) for e in skeletons)
            yield strategies.cases(kernel, pool=skeletons), name, budget_cases - left // FRESH_ONE_IN, programs
        yield strategies.cases(kernel), name + b"/fresh", budget_cases, None

    def run_phase(drawn: st.SearchStrategy[Case], digest: bytes, until: int, entries: frozenset[Case] | None) -> bool:
        """Draw cases until the run has `until`; after each failure shrunk, draw on. False: stop the search."""
        state["budget"], state["entries"] = until, entries
        examples = until - len(outcome.results)
        restarted = False
        while until > len(outcome.results):
            try:
                _interrupts_as_themselves(drawn_test(drawn, digest, examples, restarted=restarted))
                return True
            except _Enough:
                return True
            except CaseFailed:
                failures.finish(state["shrink"])
                state["shrink"] = None
                if first_failure:
                    return False
                # Drawn again from the start: the cases met so far are checked already (free), the
                # failures shrunk are explained now, so Hypothesis draws on past them.
                restarted = True
        return True

    def check_smoke(case: Case) -> bool:
        """A smoke case checked; False: stop the search (its failure, with first_failure)."""
        try:
            check_case(case)
        except CaseFailed:
            # Reported as it is: a smoke case is already the smallest case with its features.
            failures.add(state["shrink"].best, ShrinkStats())
            state["shrink"] = None
            return not first_failure
        return True

    # Smoke cases one at a time (iter_smoke_cases): a failing one stops a first-failure search
    # before the rest are even looked for.
    smoke_iter = iter_smoke_cases(kernel) if smoke is True else iter(smoke or [])
    try:
        going = True
        for case in smoke_iter:
            if len(smoke_set) >= budget_cases:
                break
            all_smoke.append(case)
            # The run's pool: its smoke cases' programs and the extra entries (pool.draw_pool).
            state["live_programs"] = max(LIVE_PROGRAMS, len(all_smoke) + 1)
            if owns is None or owns(case):
                smoke_set.append(case)
                going = check_smoke(case)
                if not going:
                    break
        if going and budget_cases > len(smoke_set):
            for drawn, digest, until, entries in drawn_phases():
                if until > len(outcome.results) and not run_phase(drawn, digest, until, entries):
                    break
    except _HarnessError as e:
        raise e.error from None
    except KeyboardInterrupt:
        # Keep the smallest failure found before the interrupt: it is a real one.
        outcome.interrupted = True
        _keep_shrinking(failures, state)
    except hypothesis.errors.Flaky as e:
        _keep_shrinking(failures, state)
        outcome.error = f"flaky failure (did not reproduce on replay): {str(e).splitlines()[0]}"
    failures.settle_met()
    return outcome


def _keep_shrinking(failures: _Failures, state: dict) -> None:
    """The failure being shrunk when the search stopped, reported as shrunk so far."""
    if state["shrink"] is not None:
        failures.finish(state["shrink"])
        state["shrink"] = None
