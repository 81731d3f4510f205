"""harness/cli/results.py: `run --junitxml/--json` and the upgrade gate's, parsed as a CI system reads them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main, results
from harness.gate import GateResult, Row, Status
from harness.gate import verdict as gate_verdict

# Drawn cases only, drawn whole: finding the smoke set (the pool draws from it too) takes longer than running
# these (conftest turns its cache off).
RUN = [
    "run",
    "--examples",
    "4",
    "--seed",
    "1",
    "--no-grads",
    "--no-database",
    "--no-smoke",
    "--no-pool",
    "--oracle",
    "torch_sdpa",
]


def run(tmp_path: Path, kernel: str) -> tuple[int, ET.Element, dict]:
    xml, summary = tmp_path / "results.xml", tmp_path / "summary.json"
    code = main(
        [*RUN, "--kernel", kernel, "--out", str(tmp_path / "store"), "--junitxml", str(xml), "--json", str(summary)]
    )
    return code, ET.parse(xml).getroot(), json.loads(summary.read_text())


def suites(root: ET.Element) -> dict[str, ET.Element]:
    return {s.get("name"): s for s in root.iter("testsuite")}


def test_a_failing_run_names_each_bug_with_its_table_and_replay(tmp_path, capsys):
    code, root, summary = run(tmp_path, "tests._fakes:BROKEN")
    capsys.readouterr()
    assert code == 1
    kernel = suites(root)["tests._fakes:BROKEN"]
    cases = kernel.findall("testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    # One red testcase per bug (never one per failing drawn case, nor its shrunk case again).
    assert len(failed) == summary["counts"]["bugs"] == len(summary["failures"]) >= 1
    assert int(kernel.get("failures")) == len(failed) and int(kernel.get("tests")) == len(cases)
    assert all(c.get("name").startswith("bug: ") for c in failed)
    # The drawn cases that passed are the other testcases.
    assert len(cases) - len(failed) == summary["cases"]["checked"] - summary["cases"]["failed"]
    texts = [c.find("failure").text for c in failed]
    assert all("D=64" in t.splitlines()[0] for t in texts)  # BROKEN's bug: head_dim 64 with 32 keys
    assert all("quantity      max_abs" in t for t in texts)
    replays = [line.split("replay: ", 1)[1] for t in texts for line in t.splitlines() if "replay: " in line]
    assert replays and all(Path(r.split()[-1]).is_file() for r in replays)
    # CI is red exactly when the run is, by its bugs' testcases: no exit-status testcase repeats them.
    assert "run" not in suites(root) and root.get("failures") == str(len(failed))

    assert (summary["verdict"], summary["exit_code"], summary["interrupted"]) == ("failure", 1, False)
    assert [(k["kernel"], k["status"]) for k in summary["kernels"]] == [("tests._fakes:BROKEN", "FAIL")]
    (row,) = summary["kernels"]
    assert (summary["cases"]["checked"], summary["cases"]["failed"]) == (row["examples"], row["failed"])
    (failure,) = summary["failures"]
    assert failure["kernel"] == "tests._fakes:BROKEN" and failure["case"]["head_dim"] == 64
    assert Path(failure["file"]).is_file() and failure["replay"] == f"python -m harness repro {failure['file']}"
    none: dict = {"oracle": [], "interpreter_divergence": [], "known": [], "inherited": [], "unexpected_passes": []}
    assert summary["findings"] == none


def test_a_passing_run_is_green(tmp_path, capsys):
    code, root, summary = run(tmp_path, "tests._fakes:CORRECT")
    capsys.readouterr()
    assert code == 0
    assert root.get("failures") == "0" and root.get("errors") == "0" and int(root.get("tests")) >= 4
    assert (summary["verdict"], summary["failures"]) == ("pass", [])
    assert [k["status"] for k in summary["kernels"]] == ["PASS"]


@pytest.mark.parametrize("option", ["--junitxml", "--json"])
def test_a_result_file_that_cannot_be_written_is_bad_usage_before_any_case(option, tmp_path, capsys):
    target = tmp_path / "no" / "such" / "dir" / "results"
    assert main(["run", "--kernel", "tests._fakes:CORRECT", "--out", str(tmp_path / "store"), option, str(target)]) == 2
    err = capsys.readouterr().err
    assert f"{option}=" in err and "does not exist" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "store" / "records").exists()


# --- The upgrade gate ---


def gate(*rows: Row) -> tuple[gate_verdict.Verdict, GateResult]:
    result = GateResult(baseline="base", candidate="cand", thresholds="built-in", rows=list(rows))
    return gate_verdict.verdict(change="jax 0.10.2 -> 0.9.2", result=result), result


REGRESSION = Row(
    category="correctness",
    subject="pallas_flash B=1 H=1 L=128 D=64",
    status=Status.WORSE,
    baseline="pass",
    candidate="FAIL",
    change="passed, now fails",
    detail="replay: python -m harness repro cand/failures/x.json",
    fails=True,
)
SAME = Row(
    category="correctness",
    subject="jax_xla",
    status=Status.UNCHANGED,
    baseline="14 pass",
    candidate="14 pass",
    change="no change",
)
UNCOMPARED = Row(
    category="speed",
    subject="pallas_flash mha_f32_256",
    status=Status.NOT_COMPARED,
    baseline="-",
    candidate="1.2 ms",
    change="not compared",
    detail="did not run in the baseline",
)


def test_the_gate_names_each_regression_and_skips_what_was_not_compared(tmp_path):
    v, result = gate(REGRESSION, SAME, UNCOMPARED)
    xml, summary = tmp_path / "gate.xml", tmp_path / "gate.json"
    results.write_gate(v, result, kernels={"pallas_flash": "both sides"}, junitxml=xml, json_path=summary)
    root = ET.parse(xml).getroot()
    by_name = {c.get("name"): c for c in root.iter("testcase")}
    assert by_name[REGRESSION.subject].find("failure").text == REGRESSION.detail
    assert by_name[SAME.subject].find("failure") is None and by_name[SAME.subject].find("skipped") is None
    assert "did not run in the baseline" in by_name[UNCOMPARED.subject].find("skipped").get("message")
    assert by_name["verdict"].find("failure").get("message").startswith("NOT SAFE: jax 0.10.2 -> 0.9.2")
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("4", "2", "1")

    doc = json.loads(summary.read_text())
    assert (doc["verdict"], doc["exit_code"], doc["kernels"]) == ("NOT SAFE", 1, {"pallas_flash": "both sides"})
    assert [f["subject"] for f in doc["failures"]] == [REGRESSION.subject]
    assert doc["findings"]["regressions"] and doc["findings"]["not compared"]


def test_a_safe_gate_is_green():
    v, result = gate(SAME)
    root = results.gate_junit(v, result)
    assert root.get("failures") == "0" and root.get("errors") == "0"
    assert results.gate_summary(v, result, kernels={})["verdict"] == "SAFE"
