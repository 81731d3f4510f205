"""A run as an object: the plan's command line round trip, its validation, and run_session with a fake sink."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.cli.commands import run as run_command
from harness.core import jaxvjp
from harness.core.errors import InputError
from harness.running import session
from harness.running.jobs.processes import default_jobs
from harness.running.jobs.shard import Shard
from harness.running.plan import RunPlan, option, plan_from_options
from harness.running.runner import CaseResult
from harness.running.sink import StopToken
from harness.store.schema import RunStatus

# Per field of RunPlan, a plan that differs from the default plan in that field (and in what the
# value needs: a check only the faithful interpreter makes). A field missing here fails
# test_every_field_is_in_the_table, so a new option is round-tripped before it is trusted.
CHANGED: dict[str, dict[str, Any]] = {
    "kernels": {"kernels": ("tests._fakes:CORRECT", "pallas_flash")},
    "oracles": {"oracles": ("jax_reference", "torch_sdpa")},
    "examples": {"examples": 7},
    "seed": {"seed": 12},
    "profile": {"profile": "nightly"},
    "out": {"out": Path("/tmp/some where/store")},
    "grads": {"grads": False},
    "database": {"database": False},
    "database_url": {"database_url": "github://org/repo/nightly-db"},
    "case_timeout": {"case_timeout": 2.5},
    "verbose": {"verbose": True},
    "in_process": {"in_process": True},
    "max_shrinks": {"max_shrinks": 0},
    "first_failure": {"first_failure": True},
    "jobs": {"jobs": default_jobs() + 1},  # the default is the machine's core count
    "shard": {"shard": Shard(2, 5)},
    "smoke": {"smoke": False},
    "pool": {"pool": False},
    "cross_interpret": {"cross_interpret": True},
    "interpreter": {"interpreter": "both"},
    "detect_races": {"detect_races": True, "interpreter": "faithful"},
    "uninitialized_memory": {"uninitialized_memory": "zero"},
    "grid_order_seed": {"grid_order_seed": 4, "interpreter": "faithful"},
    "known": {"known": ("pallas_splash_backward_nan_larger_dkv_tile", "jax_xla_local_window_ignored_alone")},
}


def parse(argv: list[str]) -> RunPlan:
    """A `run` command line as the CLI reads it."""
    assert argv[0] == "run"
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    return plan_from_options(vars(parser.parse_args(argv[1:])))


def test_every_field_is_in_the_table() -> None:
    assert set(CHANGED) == {f.name for f in dataclasses.fields(RunPlan)}


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_a_plan_parses_back_from_its_command_line(name: str) -> None:
    plan = RunPlan(**CHANGED[name])
    assert getattr(plan, name) != getattr(RunPlan(), name), f"CHANGED[{name!r}] leaves {name} at its default"
    assert parse(plan.to_argv()) == plan


def test_a_plan_with_every_field_changed_parses_back() -> None:
    changes = {k: v for change in CHANGED.values() for k, v in change.items()}
    changes |= {"jobs": 1, "in_process": False, "interpreter": "faithful"}  # what --shard and the checks need
    plan = RunPlan(**changes)
    assert parse(plan.to_argv()) == plan


def test_the_defaults_are_applied_when_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_HARNESS_PROFILE", "nightly")
    monkeypatch.setenv("ATTN_HARNESS_JOBS", "3")
    plan = parse(["run"])
    assert (plan.kernels, plan.oracles, plan.profile, plan.jobs) == (("pallas_flash",), None, "nightly", 3)
    assert plan.interpreter == "fast" and parse(["run", "--detect-races"]).interpreter == "faithful"
    # One place decides each default: the plan's fields, whether it is parsed or built.
    assert parse(["run"]) == RunPlan()
    assert RunPlan(detect_races=True).interpreter == "faithful"


def test_a_bad_default_from_the_environment_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_HARNESS_JOBS", "many")
    with pytest.raises(InputError, match="ATTN_HARNESS_JOBS='many' must be a whole number"):
        parse(["run"])


def test_a_field_added_to_the_plan_is_an_option_of_run() -> None:
    # Options once: a new RunPlan field is on the command line, with its help, and round-trips, with no
    # other edit (the parser is built from the fields).
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Extended(RunPlan):
        colour: str | None = option("--colour", type=str, metavar="C", help="the colour of the summary")

    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser, Extended)
    assert "--colour C" in parser.format_help() and "the colour of the summary" in parser.format_help()
    assert parser.parse_args(["--colour", "red"]).colour == "red"
    assert Extended(colour="red").to_argv()[-2:] == ["--colour", "red"]


def test_every_run_option_has_help_and_the_parser_has_no_default_of_its_own() -> None:
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    for action in parser._actions:
        if action.dest != "help":
            assert action.help, f"{action.option_strings} has no help"
            assert action.default in (None, False) or action.dest == "out", (action.dest, action.default)


def test_a_worker_is_its_shard_of_the_plan_in_one_process() -> None:
    plan = RunPlan(jobs=4, examples=9, seed=3)
    argv = plan.worker(Shard(1, 4)).to_argv()
    assert argv[argv.index("--jobs") + 1] == "1" and argv[argv.index("--shard") + 1] == "1/4"
    assert parse(argv) == dataclasses.replace(plan, jobs=1, shard=Shard(1, 4))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"examples": 0}, "--examples=0 must be at least 1", id="examples"),
        pytest.param({"case_timeout": float("nan")}, "--case-timeout=nan must be a positive", id="timeout-nan"),
        pytest.param({"case_timeout": 1.0, "in_process": True}, "drop --case-timeout", id="timeout-in-process"),
        pytest.param({"max_shrinks": -1}, "--max-shrinks=-1 must be at least 0", id="shrinks"),
        pytest.param({"grid_order_seed": -1, "interpreter": "faithful"}, "must be non-negative", id="grid-seed"),
        pytest.param(
            {"detect_races": True, "interpreter": "fast"}, "need --interpreter faithful, not fast", id="races-fast"
        ),
        pytest.param({"interpreter": "hlo"}, "--interpreter='hlo' must be one of", id="interpreter"),
        pytest.param({"profile": "weekly"}, "unknown profile 'weekly'", id="profile"),
        pytest.param({"jobs": 0}, "--jobs=0 must be at least 1", id="jobs"),
        pytest.param({"jobs": 2, "shard": Shard(0, 2)}, "drop --jobs=2 (or use --jobs 1)", id="jobs-and-shard"),
        pytest.param({"kernels": ()}, "at least one --kernel", id="no-kernel"),
        pytest.param({"database_url": "ftp://db"}, "--database='ftp://db': unknown scheme 'ftp'", id="database"),
    ],
)
def test_a_bad_plan_says_which_option_to_fix(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        RunPlan(**changes)


class FakeSink:
    """Records what a run hands its sink; `on_progress` runs after each case (to ask for a stop)."""

    def __init__(self, tmp: Path, on_progress: Any = None) -> None:
        self.dir, self.on_progress = tmp / "records" / "fake-run", on_progress
        self.opened: dict[str, Any] | None = None
        self.cases: list[tuple[CaseResult, bool, str | None]] = []
        self.metas: list[dict[str, Any]] = []
        self.progressed: list[tuple[int, int]] = []
        self.said: list[str] = []

    def open(self, meta: dict[str, Any], implementations: list[str]) -> Path:
        self.opened = {**meta, "implementations": implementations}
        return self.dir

    def write_case(self, result: CaseResult, *, shrunk: bool = False, failure_file: str | None = None) -> None:
        self.cases.append((result, shrunk, failure_file))

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.metas.append(meta)

    def progress(self, index: int, total: int, result: CaseResult) -> None:
        self.progressed.append((index, total))
        if self.on_progress is not None:
            self.on_progress(index)

    def say(self, line: str) -> None:
        self.said.append(line)


def _plan(tmp_path: Path, kernel: str, **changes: Any) -> RunPlan:
    # No smoke cases and no pool (whose programs are the smoke cases'): finding a fake kernel's smoke set costs
    # more than its whole run, and what these tests check of a session is the same without them.
    base = {"kernels": (kernel,), "oracles": ("jax_reference",), "examples": 3, "seed": 1, "grads": False}
    base |= {"database": False, "in_process": True, "profile": "ci", "out": tmp_path, "jobs": 1}
    base |= {"smoke": False, "pool": False}
    return RunPlan(**base | changes)


def test_a_passing_run_writes_each_case_to_its_sink_and_exits_0(tmp_path: Path) -> None:
    sink = FakeSink(tmp_path)
    outcome = session.run_session(_plan(tmp_path, "tests._fakes:CORRECT"), sink, StopToken())
    assert outcome.code == 0 and not outcome.interrupted and not outcome.failures
    assert sink.opened is not None and sink.opened["implementations"] == ["tests._fakes:CORRECT", "jax_reference"]
    assert sink.progressed == [(1, 3), (2, 3), (3, 3)] and len(sink.cases) == 3
    assert sink.metas[-1]["status"] == RunStatus.FINISHED and outcome.records == sink.dir
    (row, oracle) = outcome.rows
    assert (row.kernel, row.examples, row.status, row.pairwise is not None) == ("tests._fakes:CORRECT", 3, "PASS", True)
    assert oracle.oracle and sink.metas[-1]["summary"] == [r.to_json() for r in outcome.rows]


def test_a_stop_asked_for_ends_the_run_at_the_next_finished_case(tmp_path: Path) -> None:
    stop = StopToken()
    sink = FakeSink(tmp_path, on_progress=lambda index: stop.request(signal.SIGTERM))
    outcome = session.run_session(_plan(tmp_path, "tests._fakes:CORRECT", examples=5), sink, stop)
    assert outcome.interrupted and outcome.code == 1 and stop.settled
    assert len(sink.cases) == 1 and sink.metas[-1]["status"] == RunStatus.INTERRUPTED
    assert outcome.rows[0].status == "interrupted"


def test_a_failing_kernel_exits_1_with_its_failure_file_and_replay_line(tmp_path: Path) -> None:
    sink = FakeSink(tmp_path)
    plan = _plan(tmp_path, "tests._fakes:NAN", first_failure=True, max_shrinks=1)
    outcome = session.run_session(plan, sink, StopToken())
    (failure,) = outcome.failures
    assert outcome.code == 1 and failure.kernel == "tests._fakes:NAN" and failure.path.is_file()
    assert failure.path.parent == tmp_path / "failures" and str(failure.path) in failure.replay
    assert (failure.result, True, str(failure.path)) in sink.cases  # the shrunk case, recorded with its file
    assert sink.metas[-1]["status"] == RunStatus.FINISHED and outcome.rows[0].status == "FAIL"


def test_bad_input_is_said_before_the_store_is_opened(tmp_path: Path) -> None:
    sink = FakeSink(tmp_path)
    with pytest.raises(InputError, match="unknown implementation 'nonesuch'"):
        session.run_session(_plan(tmp_path, "nonesuch"), sink, StopToken())
    assert sink.opened is None


# A function handed down as a value to be traced, as to jax.jit: the reference's math, which jaxvjp compiles.
HANDED_DOWN = {("harness.core.reference", "harness.core.jaxvjp")}


def climbs(call: Any) -> set[tuple[str, str]]:
    """Each (module, the harness module below it) where `call()`, run under a profiler, re-entered a harness module
    from below: called back by a harness module it had called into. Calls through a library (Hypothesis drives
    the search's test function, jax traces the kernel) and module imports are not the walk."""
    stack: list[str] = []  # one module per frame; "import" for a module's import and everything it calls
    found: set[tuple[str, str]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if frame.f_code.co_name in ("<module>", "__create_fn__") or stack[-1:] == ["import"]:
                stack.append("import")
                return
            if module.startswith("harness.") and stack and stack[-1] != module and module in stack:
                between = stack[len(stack) - 1 - stack[::-1].index(module) :]
                below = [m for m in between if m.startswith("harness.") and m != module]
                if below:
                    found.add((module, below[0]))
            stack.append(module)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return found


def test_a_run_reads_downward_each_module_entered_once(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plan walked through a run that fails, shrinks, reduces its failure to a trigger and writes its file, as
    # the CLI runs it: no module calls back up into one above it (the search hands each case down to
    # harness.running.sink's recorder; the trigger search yields its candidates to the search).
    argv = ["run", "--kernel", "tests._fakes:NAN", "--oracle", "jax_reference", "--examples", "3", "--seed", "1"]
    argv += ["--first-failure", "--max-shrinks", "6", "--in-process", "--jobs", "1", "--profile", "ci"]
    argv += ["--no-database", "--out", str(tmp_path)]
    codes: list[int] = []
    # No reference program compiled yet in this process: the one known callback happens (a program is traced).
    monkeypatch.setattr(jaxvjp, "_COMPILED", collections.OrderedDict())
    found = climbs(lambda: codes.append(cli.main(argv)))
    assert codes == [1] and "shrunk to:" in capsys.readouterr().out and list((tmp_path / "failures").glob("*.json"))
    assert found == HANDED_DOWN  # the profiler sees the one known callback: it would see another
