"""harness.running.worker: which worker process a call goes to (the session's, else the default), and
its environment (XLA's CPU optimization level lowered on a CPU host only)."""

from __future__ import annotations

import pytest

from harness.running import worker
from harness.runtime import compat
from tests._fakes import small_case
from tests.fixtures import faults

FLAG = f"{worker.CPU_OPT_FLAG}={worker.CPU_OPT_LEVEL}"


@pytest.mark.parametrize(
    ("environ", "platform", "expected"),
    [
        pytest.param({}, "cpu", FLAG, id="cpu-adds-the-level"),
        pytest.param({"XLA_FLAGS": "--xla_foo=1"}, "cpu", f"--xla_foo=1 {FLAG}", id="cpu-keeps-other-flags"),
        pytest.param(
            {"XLA_FLAGS": f"{worker.CPU_OPT_FLAG}=3"}, "cpu", f"{worker.CPU_OPT_FLAG}=3", id="the-user's-level-wins"
        ),
        pytest.param({}, "tpu", None, id="tpu-untouched"),
        pytest.param({"XLA_FLAGS": "--xla_foo=1"}, "gpu", "--xla_foo=1", id="gpu-untouched"),
    ],
)
def test_worker_env(environ: dict[str, str], platform: str, expected: str | None) -> None:
    env = worker.worker_env({"PATH": "/bin", **environ}, platform)
    assert env.get("XLA_FLAGS") == expected
    assert env["PATH"] == "/bin"


def test_the_worker_process_runs_with_the_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the flag reaches the worker process's environment, the parent's stays as it was."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert compat.jax_platform() == "cpu"
    try:
        got = worker.execute(
            faults.TELLS_XLA_FLAGS,
            small_case(),
            grads=False,
            time_limit=120,
            interpret=compat.DEFAULT_INTERPRET,
        )
    finally:
        worker.shutdown()
    # The worker's own flag last, after any the user gave (XLA_FLAGS=--xla_cpu_max_isa=... under nox -s isa).
    assert got.error is not None and "XLA_FLAGS=" in got.error, got.error
    assert got.error.split("XLA_FLAGS=", 1)[1].split()[-1] == FLAG, got.error


def test_a_session_owns_its_worker_and_closes_it() -> None:
    default = worker.current()
    assert worker.current() is default  # one default per process, created on first use
    with worker.session() as mine:
        assert worker.current() is mine and mine is not default
        with worker.session() as inner:
            assert worker.current() is inner
        assert worker.current() is mine
    assert worker.current() is default
    assert mine.proc is None  # closed on the way out (none was started here)
