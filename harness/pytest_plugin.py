"""The pytest plugin (entry point `pytest11`): a kernel's smoke and drawn cases as pytest items.

    pytest --attention-kernel my_fork.attention:flash_attention --attention-like pallas_flash \
           --attention-examples 20 --attention-profile ci

adds, beside the test files pytest collects, one node per kernel, `attention:<spec>`, holding one
item per smoke case (`smoke[causal_top_left-float32-B1-H1-L256-D64-residuals]`, harness.core.smoke) and
one Hypothesis-driven item, `drawn`, that draws --attention-examples cases and shrinks a failure. Each
case runs through `harness.api.check`: the kernel in a worker process, compared with the float64 truth;
a failure's report is its error table, where the error sits and the command that replays the failure
file written under --attention-out. The fixtures `attention_kernel` and `attention_check` give a team's
own tests the same kernel and options (docs/pytest.md).

While `drawn` runs, one line says how far it is: cases done of N, failing so far, the time spent and left
(DrawnState). pytest's terminal reporter shows it as pytest shows its own progress: redrawn in place after
each case on a terminal with output captured, written once when the test ends otherwise, and, where the test
ran in a pytest-xdist worker (which cannot write to the terminal) or under -q, in a summary section at the
end, from the report's user property `attention_drawn` (which a JUnit file keeps as a property).

Without --attention-kernel the plugin does nothing and imports nothing beyond pytest: it is loaded into
every pytest session of an environment where the harness is installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.core.case import Case
    from harness.core.contract import Implementation
    from harness.core.profiles import ShrinkBudget

# Where failure files go unless --attention-out says (`run`'s default store: harness.running.session).
DEFAULT_OUT = "reports/store"
# The nodes' names: "attention:<spec>" holds "smoke[<case>]" items and the one "drawn" item.
PREFIX = "attention:"
# The drawn test's last progress line, as a user property of its reports: to the summary section of the
# process that shows the results (pytest-xdist's controller) and into a JUnit file.
PROGRESS_PROPERTY = "attention_drawn"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """The plugin's command-line options, checked (pytest_configure)."""

    kernel: str  # --attention-kernel: a built-in name, MODULE:ATTR or KERNEL=MODULE:ATTR
    like: str | None  # --attention-like: the built-in kernel a MODULE:ATTR drop-in function is run as
    examples: int | None  # --attention-examples: drawn cases (None: the profile's; 0: smoke cases only)
    profile: str  # --attention-profile: a harness Hypothesis profile (harness.core.profiles)
    out: Path  # --attention-out: failure files go to OUT/failures/
    interpreter: str  # --attention-interpreter (harness.running.runner.INTERPRETER_POLICIES)
    case_timeout: float | None  # --attention-case-timeout: seconds per kernel call (None: `run`'s default)
    database: str | None = None  # --attention-database: as `run --database` (None: Hypothesis's own default)

    @property
    def spec(self) -> str:
        """The kernel as `run --kernel` and a failure file name it."""
        return f"{self.like}={self.kernel}" if self.like else self.kernel

    def check_options(self) -> dict[str, Any]:
        """harness.api.check's keywords for these options."""
        return {"out": self.out, "interpreter": self.interpreter, "time_limit": self.case_timeout}


_OPTIONS = pytest.StashKey[Options]()
_CLOSE = pytest.StashKey[contextlib.ExitStack]()
_SHOWN = pytest.StashKey[set[str]]()  # the drawn tests whose progress line this process showed as they ran


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attention-harness", "attention kernels checked by the attention harness")
    group.addoption(
        "--attention-kernel",
        metavar="SPEC",
        help="check this kernel: a built-in name, MODULE:ATTR, or KERNEL=MODULE:ATTR (as `run --kernel`); "
        "adds its smoke cases and drawn cases as tests",
    )
    group.addoption(
        "--attention-like",
        metavar="KERNEL",
        help="the built-in kernel a MODULE:ATTR drop-in function is checked as (default pallas_flash)",
    )
    group.addoption(
        "--attention-examples",
        type=int,
        metavar="N",
        help="cases the 'drawn' test draws (default: the profile's; 0: the smoke cases only)",
    )
    group.addoption(
        "--attention-profile",
        metavar="P",
        help="the harness's Hypothesis profile (default $ATTN_HARNESS_PROFILE or dev)",
    )
    group.addoption(
        "--attention-out",
        metavar="DIR",
        default=DEFAULT_OUT,
        help=f"failure files go to DIR/failures/, each replayed by `python -m harness repro` (default {DEFAULT_OUT})",
    )
    group.addoption(
        "--attention-interpreter",
        default="fast",
        metavar="I",
        help="how a Pallas TPU kernel runs off a TPU: fast, faithful or both (as `run --interpreter`; default fast)",
    )
    group.addoption(
        "--attention-case-timeout",
        type=float,
        metavar="S",
        help="seconds per kernel call before its worker process is killed (default: as `run`)",
    )
    group.addoption(
        "--attention-database",
        metavar="URL",
        help="the drawn test's example database, as `run --database`: a directory, redis://HOST:PORT/N or "
        "github://OWNER/REPO[/ARTIFACT] (default $ATTN_HARNESS_DATABASE, else Hypothesis's .hypothesis/)",
    )


def _options(config: pytest.Config) -> Options | None:
    """The options given, checked; None without --attention-kernel. pytest.UsageError names a bad one."""
    kernel = config.getoption("attention_kernel")
    if not kernel:
        for flag in ("like", "examples", "profile", "case_timeout"):
            if config.getoption(f"attention_{flag}") is not None:
                raise pytest.UsageError(f"--attention-{flag.replace('_', '-')} needs --attention-kernel SPEC")
        return None
    from harness.core import profiles
    from harness.core.errors import InputError
    from harness.running.runner import INTERPRETER_POLICIES

    like, examples = config.getoption("attention_like"), config.getoption("attention_examples")
    if like is not None and ("=" in kernel or ":" not in kernel):
        raise pytest.UsageError(
            f"--attention-like {like} applies to a MODULE:ATTR drop-in function; --attention-kernel {kernel} is not one"
        )
    if examples is not None and examples < 0:
        raise pytest.UsageError(f"--attention-examples={examples} must be 0 (smoke cases only) or more")
    interpreter = config.getoption("attention_interpreter")
    if interpreter not in INTERPRETER_POLICIES:
        raise pytest.UsageError(f"--attention-interpreter={interpreter!r} must be one of {INTERPRETER_POLICIES}")
    timeout = config.getoption("attention_case_timeout")
    if timeout is not None and not 0 < timeout < float("inf"):
        raise pytest.UsageError(f"--attention-case-timeout={timeout} must be a positive number of seconds")
    try:
        profile = profiles.profile_name(config.getoption("attention_profile"))
    except InputError as e:
        raise pytest.UsageError(f"--attention-profile: {e}") from None
    from harness.running import database as examples_database

    database = config.getoption("attention_database") or os.environ.get(examples_database.DATABASE_ENV) or None
    wrong = examples_database.problem(database)
    if wrong is not None:
        raise pytest.UsageError(wrong.replace("--database", "--attention-database"))
    return Options(
        kernel=kernel,
        like=like,
        examples=examples,
        profile=profile,
        out=config.invocation_params.dir / config.getoption("attention_out"),
        interpreter=interpreter,
        case_timeout=timeout,
        database=database,
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("attention_kernel"):
        # A process start (harness/__init__.py): JAX reads its platforms when imported, and checking the
        # options imports it (harness.running.runner).
        from harness.runtime.devices import default_platforms_env

        default_platforms_env()
    options = _options(config)
    if options is not None:
        config.stash[_OPTIONS] = options


def pytest_sessionstart(session: pytest.Session) -> None:
    if _OPTIONS not in session.config.stash:
        return
    from harness.core import probes
    from harness.running import probes as worker_probes
    from harness.running import worker

    # Kernel code never runs in this process: the cases' kernel calls go to the session's worker, and an
    # adapter's probe to a worker of its own (as every CLI command does: harness.cli.main).
    stack = contextlib.ExitStack()
    stack.enter_context(worker.session())
    stack.enter_context(probes.calling(worker_probes.in_worker))
    session.config.stash[_CLOSE] = stack


def pytest_sessionfinish(session: pytest.Session) -> None:
    stack = session.config.stash.get(_CLOSE, None)
    if stack is not None:
        stack.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The progress lines of the drawn tests that no one saw run (pytest-xdist's workers, -q): one line each."""
    if _OPTIONS not in config.stash or terminalreporter.no_summary:
        return
    shown = config.stash.get(_SHOWN, set())
    lines = [
        f"{report.nodeid}: {properties[PROGRESS_PROPERTY]}"
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call" and report.nodeid not in shown
        for properties in [dict(getattr(report, "user_properties", ()))]
        if PROGRESS_PROPERTY in properties
    ]
    if lines:
        terminalreporter.write_sep("-", "attention: drawn cases")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """The session's collection, with the kernel's node added after what the arguments name."""
    report = yield
    options = collector.config.stash.get(_OPTIONS, None)
    if options is not None and isinstance(collector, pytest.Session) and report.passed:
        name = PREFIX + options.spec
        report.result.append(KernelNode.from_parent(collector, name=name, nodeid=name))
    return report


class KernelNode(pytest.Collector):
    """The kernel's tests: one per smoke case, and one that draws cases."""

    def collect(self) -> list[pytest.Item]:
        from harness import api
        from harness.core.errors import InputError

        options = self.config.stash[_OPTIONS]
        try:
            impl = api.kernel(options.kernel, like=options.like)
        except InputError as e:
            raise self.CollectError(f"--attention-kernel: {e}") from None
        items: list[pytest.Item] = []
        seen: dict[str, int] = {}
        for case in api.smoke_cases(impl):
            label = case_label(case)
            seen[label] = seen.get(label, 0) + 1
            label += f"-{seen[label]}" if seen[label] > 1 else ""
            nodeid = f"{self.nodeid}::smoke[{label}]"
            items.append(SmokeItem.from_parent(self, name=f"smoke[{label}]", nodeid=nodeid, impl=impl, case=case))
        examples = options.examples
        if examples is None:
            from harness.core import profiles

            examples = profiles.get(options.profile).max_examples
        if examples:
            items.append(DrawnItem.from_parent(self, name="drawn", nodeid=f"{self.nodeid}::drawn", impl=impl))
        return items


def case_label(case: Case) -> str:
    """A case as a test id: mask, dtype and shape, then what else sets it apart ('causal_top_left-bfloat16-
    B1-H1-L128-D64', 'bias-float32-B1-Hq4-Hkv2-Lq128-Lk256-D128-dominant-residuals'); never a '[' or '::'."""
    heads = f"H{case.q_heads}" if case.q_heads == case.kv_heads else f"Hq{case.q_heads}-Hkv{case.kv_heads}"
    lens = f"L{case.q_len}" if case.q_len == case.kv_len else f"Lq{case.q_len}-Lk{case.kv_len}"
    parts = [case.mask_label, case.dtype, f"B{case.batch}", heads, lens, f"D{case.head_dim}"]
    parts += [case.regime] if case.regime != "normal" else []
    parts += [f"kv_{case.kv_format}"] if case.kv_format else []
    parts += [f"scale{case.scale:g}"] if case.scale is not None else []
    parts += [f"soft_cap{case.soft_cap:g}"] if case.soft_cap is not None else []
    parts += [name for name in ("sinks", "residuals") if getattr(case, name)]
    return "-".join(parts)


_HYPOTHESIS_NOTES = ("Falsifying example", "Failing test case")


class _CannotRun(Exception):
    """The kernel cannot run in this environment at all (Implementation.cannot_run): a failure, never a skip,
    as `run` exits 4 and never 0 for it."""


class _KernelItem(pytest.Item):
    """A test of the kernel; its failure is reported as the harness reports it, not as a traceback."""

    def __init__(self, *, impl: Implementation, **kw: Any) -> None:
        super().__init__(**kw)
        self.impl = impl
        self.options = self.config.stash[_OPTIONS]

    def _runnable(self) -> None:
        reason = self.impl.cannot_run()
        if reason is not None:
            raise _CannotRun(f"{self.impl.name} cannot run here: {reason}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | Any:
        from harness import api

        error = excinfo.value
        if isinstance(error, api.CaseFailure | _CannotRun):
            # Hypothesis's own note repeats the case the report's first line names.
            notes = [str(n) for n in getattr(error, "__notes__", []) if not str(n).startswith(_HYPOTHESIS_NOTES)]
            return "\n".join([_said(error), *notes])
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def _said(error: BaseException) -> str:
    """A failure as every view words it: its failure file's bug (harness.store.bug_views), where it wrote one."""
    path = getattr(error, "path", None)
    if path is None:
        return str(error)
    import json

    from harness.store import bug_views
    from harness.store.bug import Bug
    from harness.store.failures import FailureRecord
    from harness.store.schema import RecordError

    try:
        record = FailureRecord.from_json(json.loads(Path(path).read_text()), str(path))
    except (OSError, ValueError, RecordError):
        return str(error)
    return bug_views.text(Bug.of(record, path))


class SmokeItem(_KernelItem):
    """One smoke case, checked as `run` checks it (on the faithful interpreter, for a Pallas TPU kernel)."""

    def __init__(self, *, case: Case, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case

    def runtest(self) -> None:
        from harness import api

        self._runnable()
        api.check(self.impl, self.case, smoke=True, **self.options.check_options())


class _Enough(BaseException):
    """Stops Hypothesis's shrinking when the profile's shrink budget is spent (a BaseException: Hypothesis
    takes any Exception for the test's failure)."""


@dataclasses.dataclass(kw_only=True)
class DrawnState:
    """How far the drawn test is: cases checked of `examples`, then, after the first failure (Hypothesis draws
    no more cases: profiles.BASE's report_multiple_bugs=False), its shrinking, `runs` checks within `budget`."""

    examples: int
    budget: ShrinkBudget  # the profile's
    start: float  # time.monotonic() when the test began
    cases: int = 0  # cases checked up to the first failing one, that one included
    runs: int = 0  # cases checked after it: shrink steps
    since: float | None = None  # when the first failure came
    last: Any = None  # the harness.api.CaseFailure of the smallest failing case yet

    def spent(self, now: float) -> bool:
        """Whether the shrink budget is spent."""
        if self.since is None:
            return False
        return self.runs >= self.budget.runs or now - self.since >= self.budget.seconds

    def checked(self, *, shrinking: bool) -> None:
        """One more case checked (`shrinking`: one that began after the first failure)."""
        if shrinking:
            self.runs += 1
        else:
            self.cases += 1

    def failed(self, failure: Any, now: float) -> None:
        """A case failed: the smallest failure yet (Hypothesis only tries smaller cases after the first)."""
        self.since = self.since or now
        self.last = failure

    def line(self, now: float, *, final: bool = False) -> str:
        """'7/20 cases, 0 failing, 0:41 so far, about 1:16 left', then '8/20 cases, 1 failing, shrinking 3/20
        runs, up to 0:52 left'; at the end '20/20 cases, 0 failing, took 1:57' or '8/20 cases, 1 failing, shrunk
        in 12 runs, took 1:30'. Short: a terminal's 80 columns hold the longest."""
        said = f"{self.cases}/{max(self.examples, self.cases)} cases, {int(self.since is not None)} failing"
        if final:
            shrunk = f", shrunk in {self.runs} runs" if self.since is not None else ""
            return f"{said}{shrunk}, took {_minutes(now - self.start)}"
        if self.since is None:
            return f"{said}, {_minutes(now - self.start)} so far, {self._left(now)}"
        return f"{said}, shrinking {self.runs}/{self.budget.runs} runs, {self._left(now)}"

    def _left(self, now: float) -> str:
        """The time left at the pace so far: of the cases to draw, or of the shrink budget (shrinking may end
        sooner, so 'up to')."""
        if self.since is None:
            if not self.cases:
                return "no estimate yet"
            return f"about {_minutes((now - self.start) / self.cases * max(self.examples - self.cases, 0))} left"
        shrinking = now - self.since
        pace = shrinking / self.runs if self.runs else (self.since - self.start) / self.cases
        left = min(self.budget.seconds - shrinking, pace * (self.budget.runs - self.runs))
        return f"up to {_minutes(max(left, 0.0))} left"


def _minutes(seconds: float) -> str:
    """m:ss as `run --jobs` says it (harness.core.numbers.duration), imported when first shown: the plugin loads
    nothing of the harness until it is asked to."""
    from harness.core.numbers import duration

    return duration(seconds)


class _ProgressLine:
    """An item's progress line in pytest's terminal, shown where pytest shows its own progress: redrawn in
    place on a terminal (as 'collecting ...') with output captured (as the '[ 40%]' column: pytest #3038), at
    verbosity 0 or more; otherwise written once, at the end. Not at all in a pytest-xdist worker, whose
    terminal no one sees, nor under -q: pytest_terminal_summary shows those lines."""

    def __init__(self, item: pytest.Item) -> None:
        config = item.config
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        in_place = reporter is not None and not hasattr(config, "workerinput") and config.get_verbosity() >= 0
        self.item = item
        self.reporter = reporter if in_place else None
        self.live = in_place and reporter.isatty() and config.getoption("capture", "no") != "no"
        self.capture = config.pluginmanager.get_plugin("capturemanager")
        self.begun = False

    def show(self, text: str, *, final: bool = False) -> None:
        """The item's line now (`final`: its last, which stays)."""
        if self.reporter is None or not (self.live or final):
            return
        line = f"{self.item.name}: {text}"
        held = self.capture.global_and_fixture_disabled() if self.capture else contextlib.nullcontext()
        with held:
            if not self.begun:
                self.reporter.ensure_newline()  # below the item's own line, as pytest's live log
                self.begun = True
            if self.live:
                # One row of the terminal, or a carriage return would redraw only the last row.
                self.reporter.rewrite(line[: shutil.get_terminal_size().columns - 1], erase=True)
            else:
                self.reporter.write(line)
            if final:
                # The item's line again below, for its outcome ('F', 'PASSED'), as pytest began it.
                self.reporter.currentfspath = None
                self.reporter.pytest_runtest_logstart(nodeid=self.item.nodeid, location=self.item.location)
            else:
                # pytest's mark of a line its next output must end first (TerminalReporter.write_ensure_prefix).
                self.reporter.currentfspath = -2
            self.reporter.flush()
        if final:
            self.item.config.stash.setdefault(_SHOWN, set()).add(self.item.nodeid)


class DrawnItem(_KernelItem):
    """--attention-examples cases drawn inside the kernel's contract by Hypothesis, a failure shrunk
    within the profile's shrink budget (harness.core.profiles.SHRINK_BUDGETS), as `run` shrinks."""

    def runtest(self) -> None:
        import hypothesis

        from harness import api
        from harness.core import profiles

        self._runnable()
        options = self.options
        base = profiles.get(options.profile)
        examples = base.max_examples if options.examples is None else options.examples
        state = DrawnState(examples=examples, budget=profiles.shrink_budget(options.profile), start=time.monotonic())
        progress = _ProgressLine(self)
        check = functools.partial(api.check, self.impl, **options.check_options())

        @hypothesis.settings(base, max_examples=examples, **self._database(base))
        @hypothesis.given(case=api.cases(self.impl))
        def drawn(case: Case) -> None:
            if state.spent(time.monotonic()):
                raise _Enough
            shrinking = state.since is not None
            try:
                check(case)
            except api.CaseFailure as e:
                state.failed(e, time.monotonic())
                raise
            finally:
                state.checked(shrinking=shrinking)
                progress.show(state.line(time.monotonic()))

        # The example database keeps each kernel's failures apart (the same test body checks every kernel).
        drawn.hypothesis.inner_test._hypothesis_internal_add_digest = options.spec.encode()
        progress.show(state.line(time.monotonic()))
        try:
            drawn()
        except _Enough:
            budget = state.budget
            spent = f"shrink budget spent ({budget.runs} runs or {budget.seconds:g} s)"
            raise self._reported(state.last, spent) from None
        except api.CaseFailure:
            raise
        except Exception as e:
            if state.last is None:
                raise
            # Hypothesis's final run of the smallest failure passed (its Flaky error): a flaky failure.
            raise self._reported(state.last, f"Hypothesis: {type(e).__name__}: {e}") from e
        finally:
            said = state.line(time.monotonic(), final=True)
            self.user_properties.append((PROGRESS_PROPERTY, said))
            progress.show(said, final=True)

    def _database(self, base: Any) -> dict[str, Any]:
        """The settings' database: --attention-database's (harness.running.database), paired for a shared one
        with Hypothesis's own directory; {} (the profile's) without one or for a derandomized draw."""
        from harness.running import database as examples_database

        url = self.options.database
        if url is None or base.derandomize:
            return {}
        where = examples_database.parse(url)
        if isinstance(where, Path):
            return {"database": examples_database.open_database(where)}
        home = Path(os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or ".hypothesis")  # Hypothesis's own
        return {"database": examples_database.open_database(home / "examples", where)}

    def _reported(self, failure: Any, why: str) -> BaseException:
        """The smallest failure yet, replayed and written as its failure file (`check` writes one only on
        Hypothesis's final run, which a stop before it never makes)."""
        from harness import api

        try:
            api.check(self.impl, failure.result.case, **self.options.check_options())
        except api.CaseFailure as e:
            e.add_note(f"  ({why}; this is the smallest failing case drawn)")
            return e
        failure.add_note(f"  (passed when checked again: {why})")
        return failure


# --- Fixtures for a team's own tests ---


def _given(config: pytest.Config) -> Options:
    options = config.stash.get(_OPTIONS, None)
    if options is None:
        pytest.fail("this test needs a kernel: give pytest --attention-kernel SPEC", pytrace=False)
    return options


@pytest.fixture(scope="session")
def attention_kernel(pytestconfig: pytest.Config) -> Implementation:
    """The kernel --attention-kernel (and --attention-like) name, resolved."""
    from harness import api

    options = _given(pytestconfig)
    return api.kernel(options.kernel, like=options.like)


@pytest.fixture(scope="session")
def attention_check(pytestconfig: pytest.Config, attention_kernel: Implementation) -> Callable[..., Any]:
    """harness.api.check bound to the kernel and the plugin's options: `attention_check(case)`."""
    from harness import api

    return functools.partial(api.check, attention_kernel, **_given(pytestconfig).check_options())
