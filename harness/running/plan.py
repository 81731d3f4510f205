"""One `run`'s options as a value: `RunPlan`, every field an `Option` that says how the command line writes
it, its default and its help. Defined once: the CLI's parser is built from these fields
(harness.cli.commands.run), a plan writes itself back as a command line (`RunPlan.to_argv`, for the workers
of `run --jobs` and the shards CI starts), and `plan_from_options` reads a parsed command line back."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core import profiles
from harness.core.errors import InputError
from harness.running import database as examples_database
from harness.running import runner, worker
from harness.running.jobs import processes, shard
from harness.runtime import compat

# The kernel a run checks when none is named, and where its records go.
DEFAULT_KERNEL = "pallas_flash"
DEFAULT_STORE = Path("reports/store")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Option:
    """How one RunPlan field is written on the command line, and what `run --help` says of it.

    The field's default is the option's default (one place decides it); `harness.cli.commands.run` builds
    the parser from these, and `RunPlan.to_argv` / `plan_from_options` go back and forth through them."""

    flag: str
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] | None = None  # the value's parser; None: a switch
    choices: tuple[str, ...] | None = None
    negate: bool = False  # a switch that sets the field False
    repeat: bool = False  # given once per value (the field is a tuple)
    group: str = "search"  # its group in --help: search, process or interpreter
    shared: bool = False  # defined once for several commands (harness.cli.commands._shared)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def option(flag: str, default: Any = None, *, factory: Callable[[], Any] | None = None, **how: Any) -> Any:
    """A RunPlan field written on the command line as `flag` (Option's fields in `how`)."""
    meta = {"option": Option(flag=flag, **how)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def options_of(plan: type[RunPlan] | RunPlan) -> list[tuple[dataclasses.Field, Option]]:
    """Each field of a plan (class) with its command-line Option, in the order `--help` lists them."""
    return [(f, f.metadata["option"]) for f in dataclasses.fields(plan) if "option" in f.metadata]


def _parse_shard(text: str) -> shard.Shard:
    """--shard's parser: its own message on bad input, as argparse prints a type's error."""
    try:
        return shard.Shard.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunPlan:
    """Every option of one `run`, resolved (profile, interpreter and jobs have their defaults applied)."""

    kernels: tuple[str, ...] = option("--kernel", (DEFAULT_KERNEL,), repeat=True, shared=True, help="")
    oracles: tuple[str, ...] | None = option(
        "--oracle", repeat=True, metavar="O", help="oracle to check beside the kernel (default: all but the ruler)"
    )
    examples: int | None = option("--examples", type=int, metavar="N", help="cases per kernel (default: the profile's)")
    seed: int | None = option(
        "--seed",
        type=int,
        metavar="S",
        help="Hypothesis seed (default: the profile's); a seeded run neither reads nor saves the example database",
    )
    profile: str = option(
        "--profile",
        factory=profiles.profile_name,
        type=str,
        metavar="P",
        help=f"Hypothesis profile: {', '.join(profiles.PROFILES)} (default: ${profiles.PROFILE_ENV} or dev)",
    )
    out: Path = option("--out", DEFAULT_STORE, shared=True, help="")
    grads: bool = option("--no-grads", True, negate=True, help="forward pass only")
    database: bool = option(
        "--no-database", True, negate=True, help="do not replay or save examples in the example database"
    )
    database_url: str | None = option(
        "--database",
        factory=lambda: os.environ.get(examples_database.DATABASE_ENV) or None,
        type=str,
        metavar="URL",
        help=f"the example database: {examples_database.FORMS}; a shared one is paired with "
        f"DIR/.hypothesis, and a Redis server that goes away costs one warning (default "
        f"${examples_database.DATABASE_ENV}, else DIR/.hypothesis)",
    )
    case_timeout: float | None = option(
        "--case-timeout",
        type=float,
        metavar="S",
        group="process",
        help="per-case time limit of each kernel call: kernels run in a worker process, killed on overrun "
        "(a hang, crash or exit fails that case, and the run goes on with a fresh worker); "
        f"default ${worker.TIME_LIMIT_ENV}, else {worker.DEFAULT_TIME_LIMIT_S:g}",
    )
    verbose: bool = option(
        "--verbose", False, group="process", help="print each case whole (block sizes and all) on its line"
    )
    in_process: bool = option(
        "--in-process",
        False,
        group="process",
        help="run the kernels in this process, with no time limit (for a debugger); "
        "a kernel that crashes or exits then ends the run",
    )
    max_shrinks: int | None = option(
        "--max-shrinks",
        type=int,
        metavar="N",
        help="cases run while shrinking each failure (default: the profile's; its trigger search may run half "
        "as many more)",
    )
    first_failure: bool = option(
        "--first-failure",
        False,
        help="stop each kernel's search at its first failure (default: search on, and report every distinct "
        "failure, each shrunk, with its own failure file)",
    )
    jobs: int = option(
        "--jobs",
        factory=processes.default_jobs,
        type=int,
        metavar="N",
        group="process",
        help="worker processes, each checking one shard of the run into the same store; the summary merges "
        f"them (default ${processes.JOBS_ENV}, else the number of cores)",
    )
    shard: shard.Shard | None = option(
        "--shard",
        type=_parse_shard,
        metavar="I/N",
        group="process",
        help="check only shard I of N (0 <= I < N): the cases whose program's id is I modulo N, its share of "
        "--examples; shards of one run are disjoint and the same every time (for CI jobs on several machines)",
    )
    smoke: bool = option(
        "--no-smoke",
        True,
        negate=True,
        help="skip the smoke cases (each declared mask component, tiling class and dtype at the smallest size) "
        "that a run checks before drawing cases",
    )
    pool: bool = option(
        "--no-pool",
        True,
        negate=True,
        help="draw every case whole instead of mostly from the run's pool of compiled programs "
        '(README "Where a case\'s time goes"): every case compiles anew, several times slower',
    )
    cross_interpret: bool = option(
        "--cross-interpret",
        False,
        group="process",
        help="on a TPU host: also run each Pallas TPU kernel under the interpreter as a further subject "
        "('<kernel>@interpret'), judged against the same truth, so interpreter and chip are compared",
    )
    # None: decided by the plan itself (faithful where a check needs it, else fast), see __post_init__.
    interpreter: str | None = option(
        "--interpreter",
        type=str,
        choices=runner.INTERPRETER_POLICIES,
        group="interpreter",
        help="which interpreter runs a Pallas TPU kernel off a TPU: fast (the default: the HLO interpreter for "
        "drawn cases; the faithful TPU interpret mode for smoke cases, a share of drawn cases, and the replay of "
        "every failure before it is reported), faithful (every case), or both (every case on each, compared); "
        "with --detect-races or --grid-order-seed the default is faithful",
    )
    detect_races: bool = option(
        "--detect-races", False, group="interpreter", help="run the race detector; a race fails the case"
    )
    uninitialized_memory: str = option(
        "--uninitialized-memory",
        "nan",
        type=str,
        choices=compat.UNINITIALIZED_MEMORY,
        group="interpreter",
        help="fill of buffers read before written (default nan: such a read shows as a non-finite output)",
    )
    grid_order_seed: int | None = option(
        "--grid-order-seed",
        type=int,
        metavar="N",
        group="interpreter",
        help="randomise 'parallel' grid order with seed N, rerun each kernel case with seed N+1, "
        "and fail a case whose two results differ at all",
    )
    known: tuple[str, ...] = option(
        "--known",
        (),
        repeat=True,
        metavar="FINDING",
        help="a finding (a note's name in docs/findings/, see `harness findings`) whose failures are expected: "
        "reported by name, they do not fail the run; strict: if its own case passes now, the run fails",
    )

    def __post_init__(self) -> None:
        if self.interpreter is None:  # the one place the interpreter's default is decided
            object.__setattr__(self, "interpreter", "faithful" if self.checks else "fast")
        problems = _problems(self)
        if problems:
            raise InputError(problems[0])  # one line, as every usage error: the first to fix

    def to_argv(self) -> list[str]:
        """This plan as a `run` command line: parsing it gives this plan back (tests/test_session.py)."""
        argv = ["run"]
        for f, opt in options_of(self):
            flag, value = opt.flag, getattr(self, f.name)
            if opt.negate:
                argv += [] if value else [flag]
            elif isinstance(value, bool):
                argv += [flag] if value else []
            elif isinstance(value, tuple):
                argv += [x for v in value for x in (flag, v)]
            elif value is not None:
                argv += [flag, str(value)]
        return argv

    def example_database(self) -> tuple[Path | None, examples_database.Shared | None]:
        """The example database's local directory and shared database (None, None: --no-database)."""
        if not self.database:
            return None, None
        where = examples_database.parse(self.database_url) if self.database_url else None
        if isinstance(where, Path):
            return where, None
        return self.out / ".hypothesis", where

    def worker(self, shard: shard.Shard) -> RunPlan:
        """The plan of one worker of this `--jobs` run: `shard` of it, in one process."""
        return dataclasses.replace(self, jobs=1, shard=shard)

    @property
    def checks(self) -> bool:
        """Whether a check only the faithful interpreter can make is asked for."""
        return self.detect_races or self.grid_order_seed is not None

    @property
    def interpret(self) -> compat.InterpretOptions:
        return compat.InterpretOptions(
            detect_races=self.detect_races,
            uninitialized_memory=self.uninitialized_memory,
            random_seed=self.grid_order_seed,
            check_grid_order=self.grid_order_seed is not None,
            interpreter="faithful" if self.interpreter == "faithful" else "fast",
        )

    def time_limit(self) -> float | None:
        """The per-case time limit of kernel calls: --case-timeout, else the default; None in-process.

        --cross-interpret runs its interpreted twins in this process, so it keeps the kernels here too.
        """
        if self.case_timeout is not None:
            return self.case_timeout
        if self.in_process or self.cross_interpret:
            return None
        try:
            return worker.default_time_limit()
        except ValueError as e:
            raise InputError(str(e)) from None


def _problems(plan: RunPlan) -> list[str]:
    """What is wrong with `plan`, each said as the option to fix; [] when it is a plan that can run."""
    out = []
    if plan.examples is not None and plan.examples < 1:
        out.append(f"--examples={plan.examples} must be at least 1")
    timeout = plan.case_timeout
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        out.append(f"--case-timeout={timeout} must be a positive number of seconds")
    if timeout is not None and plan.in_process:
        out.append("--in-process runs kernels with no time limit; drop --case-timeout")
    if plan.max_shrinks is not None and plan.max_shrinks < 0:
        out.append(f"--max-shrinks={plan.max_shrinks} must be at least 0")
    if plan.grid_order_seed is not None and plan.grid_order_seed < 0:
        out.append(f"--grid-order-seed={plan.grid_order_seed} must be non-negative")
    if plan.interpreter not in runner.INTERPRETER_POLICIES:
        out.append(f"--interpreter={plan.interpreter!r} must be one of {runner.INTERPRETER_POLICIES}")
    elif plan.checks and plan.interpreter != "faithful":
        out.append(f"--detect-races and --grid-order-seed need --interpreter faithful, not {plan.interpreter}")
    if plan.uninitialized_memory not in compat.UNINITIALIZED_MEMORY:
        out.append(f"--uninitialized-memory={plan.uninitialized_memory!r} must be one of {compat.UNINITIALIZED_MEMORY}")
    if plan.profile not in profiles.PROFILES:
        out.append(f"unknown profile {plan.profile!r}; profiles: {', '.join(profiles.PROFILES)}")
    if plan.jobs < 1:
        out.append(f"--jobs={plan.jobs} must be at least 1")
    if plan.jobs > 1 and plan.shard is not None:
        out.append(f"--shard={plan.shard} checks one shard in this process; drop --jobs={plan.jobs} (or use --jobs 1)")
    if not plan.kernels:
        out.append("a run needs at least one --kernel")
    database = examples_database.problem(plan.database_url) if plan.database else None  # --no-database wins
    if database is not None:
        out.append(database)
    return out


def plan_from_options(options: dict[str, Any]) -> RunPlan:
    """The plan of parsed `run` options (argparse's dests, None where not given): every default is the
    plan's own (its fields' defaults and __post_init__), never the parser's."""
    values: dict[str, Any] = {}
    for f, opt in options_of(RunPlan):
        given = options.get(opt.dest)
        if opt.negate:
            values[f.name] = not given
        elif isinstance(given, list):
            values[f.name] = tuple(given)
        elif given is not None:
            values[f.name] = given
    try:
        return RunPlan(**values)
    except ValueError as e:  # a default read from the environment ($ATTN_HARNESS_PROFILE, $ATTN_HARNESS_JOBS)
        raise InputError(str(e)) from None
