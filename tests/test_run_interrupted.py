"""Nothing lost: a run killed or interrupted midway keeps every case it finished, readable on disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.case import Case

ROOT = Path(__file__).resolve().parent.parent


def _start(out: Path) -> subprocess.Popen:
    # A cheap kernel with many examples: the run is still going when the signal comes.
    argv = ["run", "--kernel", "tests._fakes:CORRECT", "--examples", "500", "--no-grads", "--out", str(out)]
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *argv, "--no-database"],
        cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _case_records(out: Path) -> list[Path]:
    return [p for p in out.glob("records/*/*.json") if p.name != "run.json"]


def _wait_for(out: Path, proc: subprocess.Popen, n: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while len(_case_records(out)) < n:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {n} records: {proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {n} records within {timeout} s")
        time.sleep(0.05)


def test_killing_a_run_midway_leaves_every_finished_case_readable(tmp_path):
    proc = _start(tmp_path)
    _wait_for(tmp_path, proc, 6)
    proc.send_signal(signal.SIGKILL)
    output, _ = proc.communicate(timeout=60)
    finished = [line for line in output.splitlines() if line.startswith("[")]
    records = _case_records(tmp_path)
    kernel_records = []
    for path in records:
        rec = json.loads(path.read_text())  # every *.json is whole: written to a temporary, then renamed
        assert rec["kind"] == "case" and rec["schema"] == 1
        Case.from_json(rec["case"])
        if rec["implementation"] == "tests._fakes:CORRECT":
            kernel_records.append(rec)
    # Each progress line is printed after its case was written.
    assert len(kernel_records) >= len(finished) >= 1
    (run,) = tmp_path.glob("records/*/run.json")
    assert json.loads(run.read_text())["status"] == "running"  # SIGKILL leaves no time to say more


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_an_interrupted_run_says_so_and_keeps_its_cases(tmp_path, sig):
    proc = _start(tmp_path)
    _wait_for(tmp_path, proc, 4)
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output
    assert "run interrupted" in output
    assert "interrupted" in output.split("status")[-1]  # the summary table's status column
    (run,) = tmp_path.glob("records/*/run.json")
    meta = json.loads(run.read_text())
    assert meta["status"] == "interrupted"
    assert len(_case_records(tmp_path)) >= 4
    for path in _case_records(tmp_path):
        json.loads(path.read_text())
