"""A harness process ends without the interpreter's teardown, after what an exit must do (harness.runtime.teardown)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
import atexit, sys, threading, time
from harness.runtime.teardown import exit_now

class Freed:
    def __del__(self):
        print("freed by the teardown", flush=True)

kept = Freed()  # a module global: only the interpreter's teardown frees it
atexit.register(lambda: open(sys.argv[1], "w").write("atexit ran"))
if sys.argv[2] == "thread":
    def late():
        time.sleep(0.5)
        open(sys.argv[1] + ".thread", "w").write("the thread finished")
    threading.Thread(target=late).start()
sys.stdout.write("unflushed output")  # no newline, no flush: exit_now must flush it
exit_now(3)
"""


@pytest.mark.parametrize("thread", ["none", "thread"])
def test_exit_now_runs_atexit_flushes_output_and_keeps_the_code(tmp_path: Path, thread: str) -> None:
    marker = tmp_path / "marker"
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(marker), thread],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert marker.read_text() == "atexit ran"
    assert proc.stdout.startswith("unflushed output")
    if thread == "none":
        # Skipped: the teardown that frees module globals one by one (what costs a jax+torch process seconds).
        assert "freed by the teardown" not in proc.stdout
    else:
        # A non-daemon thread still running: the interpreter's own exit, which waits for it.
        assert (tmp_path / "marker.thread").read_text() == "the thread finished"
