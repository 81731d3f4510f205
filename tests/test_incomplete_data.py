"""A report or gate over incomplete data is never PASS, and says which run or file and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import gate
from harness.cli import main
from harness.gate.thresholds import load
from harness.store import read as records

RUN = "20260101T000000Z-host-aaaaaa"


def _store(root: Path, *, status: str = "finished", truncated: bool = False, run_id: str = RUN) -> Path:
    run = root / "records" / run_id
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"schema": 1, "kind": "run", "run_id": run_id, "status": status}))
    case = {
        "schema": 1,
        "kind": "case",
        "run_id": run_id,
        "case_id": "c1",
        "implementation": "pallas_flash",
        "role": "kernel",
        "passed": True,
        "comparisons": [],
    }
    (run / "c1--pallas_flash.json").write_text(json.dumps(case))
    if truncated:
        (run / "c2--pallas_flash.json").write_text(json.dumps({**case, "case_id": "c2"})[:40])
    return root


@pytest.mark.parametrize(
    ("status", "truncated", "why"),
    [
        pytest.param("running", False, "is 'running', not finished", id="killed-run"),
        pytest.param("interrupted", False, "is 'interrupted', not finished", id="interrupted-run"),
        pytest.param("failed", False, "is 'failed', not finished", id="failed-run"),
        pytest.param("finished", True, "c2--pallas_flash.json", id="truncated-record"),
    ],
)
def test_report_over_incomplete_data_is_not_pass(tmp_path, capsys, status, truncated, why):
    store = _store(tmp_path / "store", status=status, truncated=truncated)
    code = main(["report", "--store", str(store), "--out", str(tmp_path / "index.html")])
    out, err = capsys.readouterr()
    assert code == (2 if truncated else 1)  # unreadable records are bad input; an unfinished run is not a pass
    assert "PASS" not in out.splitlines()[0]
    assert why in out + err
    if not truncated:
        assert RUN in out


def test_report_over_complete_data_passes(tmp_path, capsys):
    store = _store(tmp_path / "store")
    assert main(["report", "--store", str(store), "--out", str(tmp_path / "index.html")]) == 0
    assert capsys.readouterr().out.startswith("PASS")


@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_gate_over_an_unfinished_run_fails_and_names_it(tmp_path, side):
    base = records.load([_store(tmp_path / "b", status="interrupted" if side == "baseline" else "finished")])
    cand = records.load(
        [_store(tmp_path / "c", status="running" if side == "candidate" else "finished", run_id=RUN + "x")]
    )
    result = gate.compare(base, cand, load(None))
    assert result.failed
    (row,) = [r for r in result.failures if r.status == "incomplete"]
    assert row.subject == side and "not finished" in row.detail
    assert "incomplete" in gate.format_table(result)
