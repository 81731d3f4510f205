"""A run survives its kernel: each way foreign kernel code misbehaves is one row, run through the real CLI.

Default options (no --case-timeout): the kernel runs in a worker process, so a crash, an exit
or a hang costs its case, recorded as the kernel's failure with a failure file that replays;
the run finishes (exit 1) and prints no traceback. One drawn case is enough: the run checks it,
then reruns the failure in a fresh worker, so it outlives the fault twice before it finishes.
The hang row shortens the default time limit through its environment variable
(harness.running.worker.TIME_LIMIT_ENV) instead of waiting the default's minutes; every call of
its kernel hangs, so however short the limit, its case fails the same way.

The default suite runs one row of each way (a signal, an exit, a wrong output, a hang, a lost worker under
the default --jobs); the rows that repeat a way (another exit, an exception, another wrong output) are slow:
`nox -s faults`, daily in .github/workflows/planted.yml.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.running import worker

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 600  # upper bound for one command under load; a row takes seconds
HANG_LIMIT_S = "1"


def _harness(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "harness", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LIMIT_S)


@pytest.mark.parametrize(
    ("kernel", "said", "jobs"),
    [
        pytest.param("ABORTS", "killed by SIGABRT", "1", id="abort"),
        # Default --jobs (one worker process per core): each shard's kernel worker dies on its own.
        pytest.param("SEGFAULTS", "killed by SIGSEGV", None, id="segfault-default-jobs"),
        pytest.param("EXITS_0", "exited with status 0", "1", id="sys-exit-0", marks=pytest.mark.slow),
        pytest.param("OS_EXITS_0", "exited with status 0", "1", id="os-exit-0"),
        pytest.param("MEMORY_ERROR", "MemoryError: planted", "1", id="memory-error", marks=pytest.mark.slow),
        pytest.param("WRONG_SHAPE", "shape (1, 1, 16, 31) != (1, 1, 16, 32)", "1", id="wrong-shape"),
        pytest.param("WRONG_DTYPE", "past the bound", "1", id="wrong-dtype", marks=pytest.mark.slow),
        pytest.param("TUPLE", "TypeError: run() returned tuple, not Outputs", "1", id="tuple", marks=pytest.mark.slow),
        pytest.param("NAN_EVERYWHERE", "non-finite", "1", id="nan-everywhere", marks=pytest.mark.slow),
        pytest.param("HANGS", f"per-case time limit of {HANG_LIMIT_S} s", "1", id="hang"),
    ],
)
def test_a_misbehaving_kernel_fails_its_case_and_the_run_finishes(tmp_path, capfd, kernel, said, jobs):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop(worker.TIME_LIMIT_ENV, None)
    if kernel == "HANGS":
        env[worker.TIME_LIMIT_ENV] = HANG_LIMIT_S
    if jobs is None:
        env.pop("ATTN_HARNESS_JOBS", None)  # tests/conftest.py sets it to 1 for the other tests
    # One case per process that runs the kernel: under the default --jobs, one per shard.
    examples = "1" if jobs else "2"
    args = ["run", "--kernel", f"tests.fixtures.faults:{kernel}", "--examples", examples, "--no-grads"]
    args += ["--no-database", "--max-shrinks", "0", "--out", str(tmp_path)]
    args += ["--jobs", jobs] if jobs else []
    run = _harness(args, env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "Traceback" not in output, output
    metas = [json.loads(p.read_text()) for p in tmp_path.glob("records/*/run.json")]
    assert metas and all(m["status"] == "finished" for m in metas), [m["status"] for m in metas]
    failures = sorted(tmp_path.glob("failures/*.json"))
    assert failures, output
    assert said in output, output
    # The failure replays, in a fresh worker, failing the same way (under the time limit the file records).
    # `repro`'s own entry point, called here: the kernel runs in the replay's worker process either way.
    assert cli.main(["repro", str(failures[0])]) == cli.EXIT_FAIL
    replay = capfd.readouterr()
    assert "STILL FAILS" in replay.out and said in replay.out, replay.out + replay.err
    assert "Traceback" not in replay.out + replay.err


def _run_json_statuses(store: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["status"] for p in store.glob("records/*/run.json"))


def test_a_kernel_that_exits_in_process_is_a_harness_failure_never_exit_0(tmp_path):
    # --in-process: nothing stands between the kernel's sys.exit(0) and the run; it used to end exit 0.
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    args = ["run", "--kernel", "tests.fixtures.faults:EXITS_0", "--examples", "2", "--no-grads", "--no-database"]
    run = _harness([*args, "--in-process", "--jobs", "1", "--out", str(tmp_path)], env)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "SystemExit(0)" in run.stderr and "Traceback" not in run.stdout + run.stderr
    assert _run_json_statuses(tmp_path) == ["failed"]


def test_a_lost_shard_is_a_harness_failure_and_its_run_json_says_failed(tmp_path):
    # The kernel kills the shard process that runs it: that shard never writes its summary.
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    args = ["run", "--kernel", "tests.fixtures.faults:KILLS_ITS_HARNESS", "--examples", "2", "--no-grads"]
    run = _harness([*args, "--no-database", "--jobs", "2", "--out", str(tmp_path)], env)
    assert run.returncode == 3, run.stdout + run.stderr
    metas = [json.loads(p.read_text()) for p in tmp_path.glob("records/*/run.json")]
    assert metas and all(m["status"] == "failed" for m in metas), metas
    assert all("exit status -9" in m["error"] for m in metas), metas
    assert "the worker process was killed by SIGKILL" in run.stdout
