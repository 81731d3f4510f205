"""The pytest plugin (harness/pytest_plugin.py) as a kernel team runs it: in a pytest of its own, from a
directory outside this repository, with docs/pytest.md's test file, against the upstream flash kernel, a
planted bug and the cheap stand-ins of tests/_fakes.py (milliseconds a case, for -x, -k, --lf, -n 2)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.core.profiles import ShrinkBudget
from harness.pytest_plugin import DrawnState
from harness.runtime import caches

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "pytest.md"
PLUGIN = ("-p", "harness.pytest_plugin")  # as an installed package's pytest11 entry point loads it
PLANTED = "tests.planted.fwd_causal_off_by_one:flash_attention"
# A team's runs keep their compiled programs and smoke sets in the user's cache, as these tests' own do
# (read before pytester points HOME at a directory of its own).
CACHE = caches.compilation_cache_dir() or "off"
REPLAY = re.compile(r"replay: python -m harness repro (\S+/failures/\S+\.json)")


def docs_test_file() -> str:
    """The complete test file of docs/pytest.md, as a team would copy it."""
    section = DOC.read_text().split("## Your own tests: a complete file", 1)[1]
    (block, *_) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


@pytest.fixture
def team(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A team's checkout: a directory of its own, the harness importable as if installed."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv(caches.COMPILATION_CACHE_ENV, CACHE)
    monkeypatch.delenv("ATTN_HARNESS_PROFILE", raising=False)  # the options say the profile
    return pytester


def run(team: pytest.Pytester, *args: str, timeout: float = 600) -> pytest.RunResult:
    return team.runpytest_subprocess(*PLUGIN, "--attention-profile", "ci", *args, timeout=timeout)


def junit_cases(path: Path) -> dict[str, ET.Element]:
    """Each testcase of a JUnit file by its name, checked to parse."""
    return {case.get("name"): case for case in ET.parse(path).getroot().iter("testcase")}


def test_the_docs_file_checks_the_upstream_kernel_and_passes(team: pytest.Pytester) -> None:
    team.makepyfile(test_fork=docs_test_file())
    # The file's case at serving size and one smoke case: the whole file is test_the_whole_docs_file_....
    chosen = "test_the_shape_our_users_run or smoke[none-float32-B1-H1-L128-D64]"
    result = run(team, "--attention-kernel", "pallas_flash", "--attention-examples", "0", "-k", chosen)
    result.assert_outcomes(passed=2, deselected=9)  # the file's other test, 8 smoke cases of the features and one
    # with a cotangent on the rows that see no key (segment ids)
    assert "smoke[none-float32-B1-H1-L128-D64-dominant-scale1]" not in result.stdout.str()


def needs_xdist() -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is in the test extra (pyproject.toml)")


@pytest.mark.parametrize(
    "xdist",
    [pytest.param((), id="one-process"), pytest.param(("-n", "2"), id="xdist", marks=pytest.mark.slow)],
)
def test_a_planted_bug_fails_with_its_table_and_replay_command(team: pytest.Pytester, xdist: tuple[str, ...]) -> None:
    if xdist:
        needs_xdist()
    team.makepyfile(test_fork=docs_test_file())
    chosen = "test_the_shape_our_users_run or smoke[causal_top_left-float32-B1-H1-L128-D64-dominant]"
    xml = team.path / "results.xml"
    result = run(
        team, "--attention-kernel", PLANTED, "--attention-examples", "0", "-k", chosen, "--junitxml", str(xml), *xdist
    )
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert ("2 workers" in out) == bool(xdist)
    # The kernel's own test and the team's test both report as the harness does: the table, then the replay.
    assert out.count("quantity      max_abs") >= 2
    replays = REPLAY.findall(out)
    assert len(set(replays)) == 2 and all(Path(p).is_file() for p in replays)
    assert all(Path(p).is_relative_to(team.path / "reports" / "store") for p in replays)  # --attention-out's default
    cases = junit_cases(xml)
    failing = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failing == {"test_the_shape_our_users_run", "smoke[causal_top_left-float32-B1-H1-L128-D64-dominant]"}
    smoke = cases["smoke[causal_top_left-float32-B1-H1-L128-D64-dominant]"]
    assert smoke.get("classname") == f"attention:{PLANTED}"
    assert "python -m harness repro" in smoke.find("failure").text


@pytest.mark.slow
def test_the_whole_docs_file_passes_on_the_upstream_kernel_under_xdist(team: pytest.Pytester) -> None:
    needs_xdist()
    team.makepyfile(test_fork=docs_test_file())
    xml = team.path / "results.xml"
    result = run(
        team, "--attention-kernel", "pallas_flash", "--attention-examples", "3", "-n", "2", "--junitxml", str(xml)
    )
    result.assert_outcomes(passed=12)  # the file's 2, 9 smoke cases, drawn
    assert set(junit_cases(xml)) >= {"test_the_shape_our_users_run", "test_bfloat16_cases_match_the_truth", "drawn"}


# --- The mechanics, on stand-ins that take milliseconds a case ---

SMALL_TESTS = """
from harness import api


def test_a_case_it_gets_wrong(attention_check):
    attention_check(api.Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=32, head_dim=64))


def test_a_case_it_gets_right(attention_check, attention_kernel):
    assert attention_kernel.name == "tests._fakes:BROKEN"
    attention_check(api.Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=16, head_dim=32))
"""
BROKEN = ("--attention-kernel", "tests._fakes:BROKEN")


def test_the_kernels_cases_are_collected_with_readable_ids_and_k_selects_them(team: pytest.Pytester) -> None:
    result = run(team, *BROKEN, "--collect-only", "-q")
    ids = [line for line in result.stdout.lines if line.startswith("attention:")]
    assert ids == [
        "attention:tests._fakes:BROKEN::smoke[causal_top_left-float32-B1-H1-L16-D32]",
        "attention:tests._fakes:BROKEN::smoke[bias-float32-B1-H1-L16-D32]",
        "attention:tests._fakes:BROKEN::smoke[none-float32-B1-H1-L16-D32]",
        "attention:tests._fakes:BROKEN::drawn",
    ]
    chosen = run(team, *BROKEN, "--attention-examples", "0", "-k", "causal or bias", "--collect-only", "-q")
    assert [line for line in chosen.stdout.lines if line.startswith("attention:")] == ids[:2]


def test_an_xdist_run_then_lf_reruns_its_failures_and_x_stops_at_the_first(team: pytest.Pytester) -> None:
    needs_xdist()
    team.makepyfile(test_small=SMALL_TESTS)
    xml = team.path / "results.xml"
    everything = run(team, *BROKEN, "--attention-examples", "4", "-n", "2", "--junitxml", str(xml))
    everything.assert_outcomes(failed=2, passed=4)  # the first test and drawn; the second test, 3 smoke cases
    assert "FAILURE tests._fakes:BROKEN on B=1 H=1 Lq=16/Lk=32 D=64" in everything.stdout.str()
    cases = junit_cases(xml)
    failing = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failing == {"test_a_case_it_gets_wrong", "drawn"}
    # The workers cannot write to the terminal: drawn's progress comes as its last line, in a section of the
    # summary, and as a property of its JUnit testcase.
    drawn = r"(\d)/4 cases, 1 failing, shrunk in \d+ runs, took \d+:\d\d"
    everything.stdout.re_match_lines(
        [r"-+ attention: drawn cases -+", rf"attention:tests\._fakes:BROKEN::drawn: {drawn}$"]
    )
    (said,) = [p.get("value") for p in cases["drawn"].iter("property") if p.get("name") == "attention_drawn"]
    assert re.fullmatch(drawn, said) and 1 <= int(re.fullmatch(drawn, said)[1]) <= 4
    again = run(team, *BROKEN, "--attention-examples", "4", "--lf", "-x", "-v")
    again.assert_outcomes(failed=1)  # nothing that passed runs again, and -x stops before drawn
    again.stdout.fnmatch_lines(["*rerun previous 2 failures*", "*test_a_case_it_gets_wrong FAILED*"])
    assert "stopping after 1 failures" in again.stdout.str() and "::drawn" not in again.stdout.str()


def on_a_terminal(team: pytest.Pytester, *args: str, timeout: float = 300) -> str:
    """What pytest writes to a terminal (a pseudo-terminal, 100 columns), run as `run` runs it, colours removed."""
    pty = pytest.importorskip("pty", reason="a pseudo-terminal needs a POSIX system")
    command = [sys.executable, "-m", "pytest", *PLUGIN, "--attention-profile", "ci", "-p", "no:cacheprovider", *args]
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100"}
    with subprocess.Popen(command, cwd=team.path, env=env, stdin=follower, stdout=follower, stderr=follower) as proc:
        os.close(follower)
        written, deadline = bytearray(), time.monotonic() + timeout
        while time.monotonic() < deadline and select.select([leader], [], [], deadline - time.monotonic())[0]:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # Linux: every writer has closed the terminal
                break
            if not chunk:
                break
            written += chunk
        proc.kill()
    os.close(leader)
    return re.sub(r"\x1b\[[0-9;]*m", "", written.decode(errors="replace"))


def test_the_drawn_tests_progress_is_one_line_redrawn_on_a_terminal(team: pytest.Pytester) -> None:
    written = on_a_terminal(team, "--attention-kernel", "tests._fakes:CORRECT", "--attention-examples", "3")
    assert "4 passed" in written
    # Redrawn in place after each case (a carriage return, no newline), then its last line stays.
    for done in range(4):
        assert f"\rdrawn: {done}/3 cases, 0 failing, " in written
    assert re.search(r"\rdrawn: 3/3 cases, 0 failing, took \d+:\d\d +\r?\n", written)
    assert "attention: drawn cases" not in written  # shown as it ran: not again in the summary


@pytest.mark.parametrize(
    ("state", "now", "final", "line"),
    [
        pytest.param(dict(), 0.0, False, "0/20 cases, 0 failing, 0:00 so far, no estimate yet", id="begun"),
        pytest.param(dict(cases=5), 10.0, False, "5/20 cases, 0 failing, 0:10 so far, about 0:30 left", id="drawing"),
        # 2 s a shrink step, 17 steps left in the budget's 20.
        pytest.param(
            dict(cases=8, runs=3, since=16.0),
            22.0,
            False,
            "8/20 cases, 1 failing, shrinking 3/20 runs, up to 0:34 left",
            id="shrinking",
        ),
        pytest.param(
            dict(cases=8, runs=1, since=16.0),
            306.0,
            False,
            "8/20 cases, 1 failing, shrinking 1/20 runs, up to 0:10 left",
            id="shrinking-to-the-budgets-seconds",
        ),
        pytest.param(dict(cases=20), 75.0, True, "20/20 cases, 0 failing, took 1:15", id="passed"),
        pytest.param(
            dict(cases=22), 3665.0, True, "22/22 cases, 0 failing, took 1:01:05", id="database-replays-and-hours"
        ),
        pytest.param(
            dict(cases=8, runs=12, since=16.0),
            90.0,
            True,
            "8/20 cases, 1 failing, shrunk in 12 runs, took 1:30",
            id="failed",
        ),
    ],
)
def test_the_drawn_tests_progress_line(state: dict, now: float, final: bool, line: str) -> None:
    drawn = DrawnState(examples=20, budget=ShrinkBudget(runs=20, seconds=300), start=0.0, **state)
    assert drawn.line(now, final=final) == line


def test_the_fixtures_without_a_kernel_say_what_to_give(team: pytest.Pytester) -> None:
    team.makepyfile(test_small=SMALL_TESTS)
    result = team.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*this test needs a kernel: give pytest --attention-kernel SPEC*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--attention-examples", "2"], "--attention-examples needs --attention-kernel SPEC", id="no-kernel"
        ),
        pytest.param([*BROKEN, "--attention-examples", "-1"], "--attention-examples=-1 must be 0", id="examples"),
        pytest.param([*BROKEN, "--attention-interpreter", "hlo"], "--attention-interpreter='hlo' must be", id="interp"),
        pytest.param(
            ["--attention-kernel", "pallas_flash", "--attention-like", "jax_xla"],
            "--attention-like jax_xla applies to a MODULE:ATTR drop-in function",
            id="like",
        ),
        pytest.param(["--attention-kernel", "tests.no_such:f"], "cannot import module 'tests.no_such'", id="kernel"),
    ],
)
def test_bad_options_are_one_usage_line(team: pytest.Pytester, args: list[str], message: str) -> None:
    result = team.runpytest_subprocess(*PLUGIN, *args, "--collect-only")
    assert result.ret != 0
    assert message in result.stdout.str() + result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
