"""harness.running.worker: which worker process a call goes to (the session's, else the default)."""

from __future__ import annotations

from harness.running import worker


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
