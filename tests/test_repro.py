"""`python -m harness repro FILE`: exit 0 passes now, 1 still fails, 2 bad file (one line, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.running.failures import failure_document, write_failure
from harness.running.runner import Check, run_case
from harness.runtime import isa
from kernels.pallas_flash import uniform_blocks
from tests import _fakes, _removed

ROOT = Path(__file__).resolve().parent.parent

VALID = {
    "schema": 1,
    "kind": "failure",
    "kernel": "pallas_flash",
    "oracles": ["torch_sdpa"],
    "grads": False,
    "case": {"batch": 1, "q_heads": 1, "kv_heads": 1, "q_len": 128, "kv_len": 128, "head_dim": 64},
}


def _with(**changes):
    doc = json.loads(json.dumps(VALID))
    for key, value in changes.items():
        if value is _DROP:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc)


def _case(**changes):
    return {**VALID["case"], **changes}


_DROP = object()
BLOCKS = uniform_blocks()

# (file text or None for a missing file, a word the one-line message must contain)
MALFORMED = [
    pytest.param(None, "cannot read", id="missing-file"),
    pytest.param("", "not JSON", id="empty-file"),
    pytest.param("{not json", "not JSON", id="not-json"),
    pytest.param("[1, 2]", "JSON object", id="not-an-object"),
    pytest.param(_with(kernel=_DROP), "missing fields ['kernel']", id="missing-field"),
    pytest.param(_with(colour="red"), "unknown fields ['colour']", id="unknown-field"),
    pytest.param(_with(schema=99), "schema=99", id="wrong-schema"),
    pytest.param(_with(kind="case"), "kind", id="wrong-kind"),
    pytest.param(_with(kernel="no_such_kernel"), "unknown implementation", id="unknown-kernel"),
    pytest.param(_with(kernel="no_such_module:fn"), "cannot import", id="unknown-kernel-module"),
    pytest.param(_with(oracles=["no_such_oracle"]), "unknown implementation", id="unknown-oracle"),
    pytest.param(_with(oracles=["pallas_flash"]), "is a kernel", id="kernel-as-oracle"),
    pytest.param(_with(grads="yes"), "grads", id="bad-grads"),
    pytest.param(_with(time_limit=-1), "time_limit", id="bad-time-limit"),
    pytest.param(_with(interpret={"uninitialized_memory": "garbage"}), "uninitialized_memory", id="bad-interpret"),
    pytest.param(_with(interpret={"colour": 1}), "unknown fields", id="unknown-interpret-field"),
    pytest.param(_with(case=_case(head_dim=-64)), "head_dim", id="bad-case-value"),
    pytest.param(_with(case={"batch": 1}), "missing fields", id="case-missing-fields"),
    pytest.param(_with(case=_case(q_heads=3, kv_heads=2)), "multiple of kv_heads", id="case-invalid"),
    pytest.param(_with(case=_case(q_len=100)), "outside pallas_flash's contract", id="case-outside-contract"),
    pytest.param(
        _with(case=_case(blocks={**BLOCKS, "block_k": 96})), "outside pallas_flash's contract", id="blocks-outside"
    ),
]


@pytest.mark.parametrize("text, words", MALFORMED)
def test_malformed_file_exits_2_with_one_line(tmp_path, capsys, text, words):
    path = tmp_path / "failure.json"
    if text is not None:
        path.write_text(text)
    assert cli.main(["repro", str(path)]) == cli.EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and str(path) in lines[0]
    assert words in lines[0]
    assert "Traceback" not in err


def test_bad_file_from_a_real_process_prints_one_line_and_no_traceback(tmp_path):
    path = tmp_path / "failure.json"
    path.write_text(_with(kernel="no_such_kernel"))
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "repro", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


@_removed.needs(_removed.GPU_ATTENTION)
def test_a_case_the_installed_release_refuses_exits_5(tmp_path, capsys):
    # MHA-3 as jax 0.5.3 shipped it (docs/history.md): a partial tile that mha read past the end of;
    # the installed mha (jax 0.6.2 on) raises for it instead. No wrong answer: `bisect` counts it fixed.
    from kernels import pallas_gpu

    assert not pallas_gpu.PARTIAL_TILES  # the installed release refuses a partial tile
    path = ROOT / "docs" / "history" / "MHA-3_jax0.5.3.json"
    assert cli.main(["repro", str(path)]) == cli.EXIT_REFUSED
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        f"REFUSED: {path}: the installed release refuses the case (pallas_gpu): "
        "block_q_dq=64 must divide q_len=96: this mha refuses a partial tile"
    ]
    # A case outside the contract for the harness's own reasons stays bad input.
    doc = json.loads(path.read_text())
    doc["case"]["blocks"]["block_q"] = 48
    other = tmp_path / "failure.json"
    other.write_text(json.dumps(doc))
    assert cli.main(["repro", str(other)]) == cli.EXIT_USAGE
    assert "block_q=48 must be one of" in capsys.readouterr().err


@_removed.needs(_removed.GPU_ATTENTION)
def test_a_refusal_of_the_backward_alone_leaves_a_forward_only_file_replayable(capsys):
    # MHA-1 as jax 0.4.30 shipped it: Lq=64 < Lk=128 with tiles of 16, replayed in BlockSizes' six here.
    # The installed mha refuses that tiling in its backward only ("must be divided into the same number
    # of blocks"): the file with gradients is refused, its forward alone replays and passes (fixed in 0.4.36).
    history = ROOT / "docs" / "history"
    assert cli.main(["repro", str(history / "MHA-1_jax0.4.30.json")]) == cli.EXIT_REFUSED
    assert "(one backward grid axis)" in capsys.readouterr().out
    assert cli.main(["repro", str(history / "MHA-1_jax0.4.30_forward.json")]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("PASSES NOW")


def _failure_file(tmp_path, kernel=_fakes.BROKEN, case=None) -> Path:
    case = case or _fakes.small_case()
    result = run_case(case, [kernel], grads=True)
    assert not result.passed
    return write_failure(tmp_path, result, Check(kernel=kernel, grads=True))


def test_still_failing_exits_1_and_prints_the_table(tmp_path, capsys):
    path = _failure_file(tmp_path)
    assert cli.main(["repro", str(path)]) == cli.EXIT_FAIL
    out = capsys.readouterr().out
    assert "quantity" in out and "FAIL" in out
    assert out.strip().splitlines()[-1].startswith("STILL FAILS")


def test_fixed_kernel_exits_0(tmp_path, capsys):
    path = _failure_file(tmp_path)
    assert cli.main(["repro", str(path), "--kernel", "tests._fakes:CORRECT"]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("PASSES NOW")


def test_changed_versions_are_named_before_the_result(tmp_path, capsys):
    path = _failure_file(tmp_path)
    doc = json.loads(path.read_text())
    doc["versions"]["jax"] = "0.0.1"
    doc["tolerance_version"] = 0
    path.write_text(json.dumps(doc))
    cli.main(["repro", str(path)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    changed = next(i for i, line in enumerate(lines) if "installed versions differ" in line)
    assert "jax 0.0.1 -> " in lines[changed]
    assert "tolerance table changed" in out
    assert changed < next(i for i, line in enumerate(lines) if "quantity" in line)


def test_a_replay_at_another_isa_is_named_before_the_result(tmp_path, capsys):
    path = _failure_file(tmp_path)
    doc = json.loads(path.read_text())
    assert doc["host"] == isa.describe()
    doc["host"]["isa"] = "AMX"  # a level isa.level() never reports: above those the harness tests under
    path.write_text(json.dumps(doc))
    cli.main(["repro", str(path)])
    lines = capsys.readouterr().out.splitlines()
    moved = next(i for i, line in enumerate(lines) if "XLA's CPU ISA differs" in line)
    assert f"AMX -> {isa.level()}" in lines[moved]
    assert moved < next(i for i, line in enumerate(lines) if "quantity" in line)


def test_recorded_versions_that_match_are_not_mentioned(tmp_path, capsys):
    path = _failure_file(tmp_path)
    cli.main(["repro", str(path)])
    assert "differ" not in capsys.readouterr().out


def test_document_from_run_has_everything_a_replay_needs():
    result = run_case(_fakes.small_case(), [_fakes.BROKEN], grads=False)
    doc = failure_document(result, kernel=_fakes.BROKEN.name, oracles=[], grads=False)
    assert {"kernel", "oracles", "grads", "case", "interpret", "tolerance_version", "versions", "results"} <= set(doc)
    assert set(doc["versions"]) >= {"python", "jax", "jaxlib", "libtpu", "torch", "harness"}


def test_still_failing_prints_where_the_error_sits(tmp_path, capsys):
    path = _failure_file(tmp_path)
    assert cli.main(["repro", str(path)]) == cli.EXIT_FAIL
    out = capsys.readouterr().out
    assert "where the error sits" in out
    assert "out: past the bound in 16 of 16 q rows (0-15), head 0" in out  # BROKEN scales every output row


def test_a_file_written_before_errors_were_located_replays_and_locates_them(capsys):
    # A pinned file from before locating existed, replayed against the planted bug it was found with:
    # the causal off-by-one leaves query 0 with no key, so its gradients are non-finite (X).
    old = ROOT / "tests" / "regressions" / "aaa4dc083411-89abe1.json"
    assert "located" not in old.read_text()
    kernel = "tests.planted.fwd_causal_off_by_one:flash_attention"
    assert cli.main(["repro", str(old), "--kernel", kernel]) == cli.EXIT_FAIL
    out = capsys.readouterr().out
    strips = [
        line.split()[-1] for line in out.splitlines() if line.split()[:2] in (["dq", "h0"], ["dk", "h0"], ["dv", "h0"])
    ]
    assert strips and all(s.startswith("|X") for s in strips), out
    assert "out: past the bound in 128 of 128 q rows" in out
