"""The run command end to end: exit codes, records on disk, planted bugs caught."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.case import Case
from harness.cli import main
from harness.contract import resolve
from harness.masks import Mask
from harness.runner import run_case

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["run", "--kernel", "nonesuch"], "unknown implementation 'nonesuch'", id="kernel"),
        pytest.param(["run", "--oracle", "pallas_flash"], "is a kernel", id="oracle-role"),
        pytest.param(["run", "--profile", "weekly"], "unknown profile 'weekly'", id="profile"),
        pytest.param(["run", "--examples", "0"], "--examples=0 must be at least 1", id="examples"),
        pytest.param(["run", "--examples", "many"], "invalid int value", id="examples-type"),
        pytest.param(["run", "--colour"], "unrecognized arguments", id="option"),
        pytest.param(["fly"], "invalid choice", id="command"),
    ],
)
def test_bad_usage_exits_2_with_one_line(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)] if argv[0] == "run" else argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_upstream_kernel_passes_and_every_case_is_on_disk(tmp_path, capsys):
    assert main(["run", "--examples", "2", "--seed", "1", "--out", str(tmp_path), "--no-database"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "Pallas TPU interpreter" in out
    (run_dir,) = (tmp_path / "records").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "finished" and meta["versions"]["jax"]
    cases = [json.loads(p.read_text()) for p in run_dir.glob("*--*.json")]
    assert {c["implementation"] for c in cases} == {"pallas_flash", "torch_sdpa"}
    assert len(cases) == 4 and all(c["passed"] and c["schema"] == 1 for c in cases)
    assert all(Case.from_json(c["case"]).case_id == c["case_id"] for c in cases)


def test_a_planted_forward_bug_given_as_a_drop_in_exits_1_with_a_replay_command(tmp_path):
    kernel = "tests.planted.fwd_causal_off_by_one:flash_attention"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--kernel",
            kernel,
            "--profile",
            "ci",
            "--examples",
            "10",
            "--out",
            str(tmp_path),
            "--no-database",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout and "python -m harness repro" in proc.stdout
    assert "where the error sits" in proc.stdout and "out: past the bound" in proc.stdout
    (failure,) = (tmp_path / "failures").glob("*.json")
    doc = json.loads(failure.read_text())
    assert doc["kernel"] == kernel
    shrunk = Case.from_json(doc["case"])
    assert shrunk.mask.causal == "top_left"  # the bug lives in the causal mask
    assert (shrunk.batch, shrunk.q_heads, shrunk.q_len) == (1, 1, 128)  # shrunk to the smallest shape


def test_a_planted_backward_only_bug_is_caught_by_the_gradients_alone():
    kernel = resolve("tests.planted.bwd_dkv_causal:flash_attention")
    case = Case(1, 1, 1, 128, 128, 64, mask=Mask(causal="top_left"))
    forward = run_case(case, [kernel], grads=False)
    assert forward.passed, "the bug must be invisible to the forward pass"
    result = run_case(case, [kernel])
    failed = {c.quantity for c in result.subjects[0].comparisons if not c.passed}
    assert failed == {"dk", "dv"}  # the dq kernel and the output are right
