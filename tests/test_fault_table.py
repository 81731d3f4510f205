"""The fault table on the paths users take: drop-ins of the real kernels (tests/fixtures/dropins.py) that
crash, exit, hang, raise or answer wrong on some of their calls, each run through the real CLI with default
options (`--jobs 1`). Each must end the run exit 1 with run.json finished, a failure file that replays, and
no traceback: a kernel that misbehaves on one call in N never ends a run green (harness.core.verdicts).

One row per path through the verdict runs in the default suite: a refusal under one interpreter here, a flaky
failure as the default row of the second test (a result that changes between calls), held to the same end; the
whole table is slow (`nox -s faults`, daily in .github/workflows/planted.yml).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.core.emptygrads import ALONE
from harness.running import worker

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 900  # upper bound for one command under load
HANG_LIMIT_S = "20"  # the per-case time limit of a hanging row, instead of the default's minutes
slow = pytest.mark.slow


def _harness(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "harness", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LIMIT_S)


def _row(spec: str, examples: int, said: str, *marks: pytest.MarkDecorator) -> object:
    return pytest.param(spec, examples, said, marks=marks, id=spec.rpartition(":")[2])


D = "tests.fixtures.dropins:"
E = "tests.fixtures.emptyrows:"
ROWS = [
    # The first call of every process exits 0: the probe's worker used to be the run's own process (exit 0,
    # 0 cases checked); now the probe's worker exits, and the run's first case is the kernel's failure.
    # Slow (two minutes: every worker the run starts exits on its first call and is started again).
    _row(D + "OS_EXIT_FIRST", 2, "exited with status 0", slow),
    # NaN on the first call of a process: the run's first case fails, its replay in the same worker passes.
    # Slow: a flaky failure's path is the default row of test_a_result_that_changes_between_calls_... below.
    _row(D + "NAN_FIRST", 2, "FLAKY FAILURE", slow),
    # Raises under the fast interpreter alone: the probe's refusal is checked as a case, never a pass. One drawn
    # case is enough: the failure is the refusal's own case (drawn cases run under the faithful interpreter, and pass).
    _row(D + "RAISE_FAST_ONLY", 1, "RuntimeError: planted: the kernel raised"),
    _row(D + "SYS_EXIT_FIRST", 2, "exited with status 0", slow),
    _row(D + "ABORT_THIRD", 6, "killed by SIGABRT", slow),
    _row(D + "SEGFAULT_ONE_IN_3", 6, "killed by SIGSEGV", slow),
    _row(D + "OS_EXIT_THIRD", 6, "exited with status 0", slow),
    _row(D + "HANG_THIRD", 6, f"per-case time limit of {HANG_LIMIT_S} s", slow),
    _row(D + "MEMORY_ERROR_THIRD", 6, "MemoryError: planted", slow),
    _row(D + "NAN_ONE_IN_3", 6, "non-finite", slow),
    _row(D + "WRONG_SHAPE_THIRD", 6, "shape", slow),
    _row(D + "WRONG_TYPE_EVERY", 2, "ValueError: unexpected tree structure", slow),
    _row(D + "NAN_BACKWARD", 2, "non-finite", slow),
    _row(D + "ABORT_BACKWARD", 2, "killed by SIGABRT", slow),
    _row("jax_xla=" + D + "NN_SEGFAULT_THIRD", 6, "killed by SIGSEGV", slow),
    _row("jax_xla=" + D + "NN_NAN_ONE_IN_3", 6, "non-finite", slow),
    _row("jax_xla=" + D + "NN_WRONG_DTYPE_EVERY", 2, "past the bound", slow),
    # A backward wrong on rows that see no key alone (tests/fixtures/emptyrows.py), one per way such rows are
    # made: an additive -inf mask, an additive finfo.min mask, lengths. Each fails a 30-case run, saying so.
    _row("torch_cpu_flash=" + E + "TORCH_NEG_INF_AS_UNIFORM", 30, ALONE, slow),
    _row("torch_cpu_flash=" + E + "TORCH_FINFO_MIN_DETACHED", 30, ALONE, slow),
    _row("jax_xla=" + E + "NN_KV_LENGTH_0_DETACHED", 30, ALONE, slow),
]


@pytest.mark.parametrize(("spec", "examples", "said"), ROWS)
def test_a_drop_in_misbehaving_on_some_calls_fails_the_run_with_a_file_that_replays(
    tmp_path, capfd, spec, examples, said
):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop(worker.TIME_LIMIT_ENV, None)
    if "HANG" in spec:
        # Only the hanging row shortens the default limit: elsewhere a compile slowed by a loaded machine
        # would time out and turn the row's own fault (a NaN on one call) into another failure.
        env[worker.TIME_LIMIT_ENV] = HANG_LIMIT_S
    args = ["run", "--kernel", spec, "--examples", str(examples), "--seed", "1", "--jobs", "1", "--out", str(tmp_path)]
    run = _harness(args, env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "Traceback" not in output, output
    metas = [json.loads(p.read_text()) for p in tmp_path.glob("records/*/run.json")]
    assert [m["status"] for m in metas] == ["finished"], output
    assert said in output, output
    failures = sorted(tmp_path.glob("failures/*.json"))
    assert failures, output
    _replays(failures[0], capfd)


def _replays(failure: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """It replays, in a fresh worker, under the time limit the file records; a flaky failure may pass there, and
    says so. `repro`'s own entry point, called here: the kernel runs in the replay's worker process either way."""
    code = cli.main(["repro", str(failure)])
    replay = capfd.readouterr()
    assert code in (cli.EXIT_OK, cli.EXIT_FAIL), replay.out + replay.err
    assert ("STILL FAILS" if code else "PASSES NOW") in replay.out
    assert "Traceback" not in replay.out + replay.err


# A result that changes between calls on the same inputs, for each family's signature: NaN on one run of the
# compiled kernel in 3 (a case runs it twice), landing on a case's first run or on its rerun alone. It fails
# the run as a flaky failure, never as an interpreter divergence, with and without the smoke cases, with one
# worker or the default's. Like every row of the fault table, it ends the run exit 1 with run.json finished and a
# failure file that replays, with no traceback. One row runs in the default suite.
CHANGING = [
    pytest.param(D + "FLASH_NAN_ONE_RUN_IN_3", ["--no-smoke", "--jobs", "1"], id="flash-no-smoke-jobs-1"),
    *(
        pytest.param(f"{family}{D}{attr}", opts, id=f"{name}-{label}", marks=slow)
        for name, family, attr in (
            ("flash", "", "FLASH_NAN_ONE_RUN_IN_3"),
            ("splash", "pallas_splash=", "SPLASH_NAN_ONE_RUN_IN_3"),
            ("paged", "pallas_paged=", "PAGED_NAN_ONE_RUN_IN_3"),
        )
        for label, opts in (
            ("no-smoke-jobs-1", ["--no-smoke", "--jobs", "1"]),
            ("jobs-1", ["--jobs", "1"]),
            ("no-smoke", ["--no-smoke"]),
            ("defaults", []),
        )
        # Left out: paged under the defaults, whose shards' third runs land on smoke cases of length 0, every row
        # unwritten by the kernel's convention (empty_rows "unwritten"): a NaN there is no wrong answer.
        if (name, label) not in (("flash", "no-smoke-jobs-1"), ("paged", "defaults"))
    ),
]


@pytest.mark.parametrize(("spec", "options"), CHANGING)
def test_a_result_that_changes_between_calls_is_a_flaky_failure_never_a_divergence(tmp_path, capfd, spec, options):
    from harness.cli.commands.repro import recorded_flaky

    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop(worker.TIME_LIMIT_ENV, None)
    run = _harness(["run", "--kernel", spec, "--examples", "5", "--seed", "1", *options, "--out", str(tmp_path)], env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "Traceback" not in output, output
    assert {json.loads(p.read_text())["status"] for p in tmp_path.glob("records/*/run.json")} == {"finished"}, output
    assert "interpreter divergence" not in output and not list(tmp_path.glob("divergences/*.json")), output
    failures = sorted(tmp_path.glob("failures/*.json"))
    files = [json.loads(p.read_text()) for p in failures]
    assert files and all(recorded_flaky(f["results"], f["kernel"]) for f in files), output
    assert "FLAKY FAILURE" in output
    _replays(failures[0], capfd)
