"""harness/store/bug.py and harness/store/bug_views.py: the failure as one typed value, rendered by one module.

A field added to the value (tests/planted_field.py: a labelled field, no view told of it) is found in the terminal,
`run --json`, JUnit, the HTML report's card and the pytest plugin's report of one planted bug."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.core.case import Case
from harness.store import bug_views
from harness.store.bug import Bug
from harness.store.failures import FailureRecord
from harness.store.schema import RecordError
from tests import record_builders as rb
from tests.planted_field import TEXT

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "tests.planted.fwd_causal_off_by_one:flash_attention"
SMOKE = "smoke[causal_top_left-float32-B1-H1-L128-D64-dominant]"  # a smoke case the planted bug fails
# `python -m harness`, with the planted field added first.
HARNESS = (
    "-c",
    "import sys, tests.planted_field as p; p.plant(); from harness.cli import main; sys.exit(main(sys.argv[1:]))",
)


def _python(*argv: object, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop("ATTN_HARNESS_PROFILE", None)
    command = [sys.executable, *map(str, argv)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_a_field_added_to_the_value_is_in_every_view(tmp_path: Path) -> None:
    run = _python(
        *HARNESS, "run", "--kernel", KERNEL, "--examples", "2", "--jobs", "1", "--no-grads", "--no-database",
        "--junitxml", tmp_path / "j.xml", "--json", tmp_path / "s.json", "--out", tmp_path / "store",
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"planted field: {TEXT}" in run.stdout
    (failure,) = json.loads((tmp_path / "s.json").read_text())["failures"]
    assert failure["planted"] == TEXT
    (red,) = [c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase") if c.find("failure") is not None]
    assert f"planted field: {TEXT}" in red.find("failure").text
    report = _python(*HARNESS, "report", "--store", tmp_path / "store", "--out", tmp_path / "r.html")
    assert report.returncode == 1, report.stderr
    card = (tmp_path / "r.html").read_text().split('<section id="failures">', 1)[1]
    assert f"<dt>planted field</dt><dd>{TEXT}</dd>" in card
    plugin = _python(
        "-m", "pytest", "-p", "tests.planted_field", "-p", "harness.pytest_plugin", "-p", "no:cacheprovider",
        "--attention-kernel", KERNEL, "--attention-examples", "0", "--attention-profile", "ci", "-k", SMOKE,
        cwd=tmp_path,
    )  # fmt: skip
    assert "1 failed" in plugin.stdout, plugin.stdout[-3000:]
    assert f"planted field: {TEXT}" in plugin.stdout


# --- the value and its views, from a built failure file ---


def _record(**search: object) -> FailureRecord:
    case = rb.case(3, causal=True)
    result = rb.case_record("20261207T100000Z-host-aaaaaa", case, fail_quantity="out")
    entry = {k: result[k] for k in ("passed", "backend", "empty_rows", "comparisons") if k in result}
    return FailureRecord(
        kernel="pallas_flash", oracles=("torch_sdpa",), grads=False, case=case.to_json(),
        failure="pallas_flash: out: err 5e-05 > bound 1e-05", results={"pallas_flash": entry}, search=search or None,
    )  # fmt: skip


def test_the_value_is_read_from_its_failure_file_and_round_trips_through_json() -> None:
    words = "fails when: a causal mask alone"
    bug = Bug.of(_record(trigger_words=words, explains=["case a", "case b"], replaces="pallas_flash"), "f/x.json")
    assert (bug.kernel, bug.verdict, bug.trigger, bug.replaces) == ("pallas_flash", "failure", words, "pallas_flash")
    assert bug.explains == ("case a", "case b") and bug.replay == "python -m harness repro f/x.json"
    assert bug.shrunk_case == str(Case.from_json(bug.case)) and bug.case_id == Case.from_json(bug.case).case_id
    (table,) = bug.tables
    assert [c.quantity for c in table.comparisons if not c.passed] == ["out"]
    assert Bug.from_json(json.loads(json.dumps(bug.to_json()))) == bug


def test_every_labelled_field_is_a_row_and_each_view_says_it_once() -> None:
    search = {"trigger_words": "fails when: a causal mask alone", "finding": "f1", "expected": True, "shrunk": True}
    bug = Bug.of(_record(**search), "f/x.json")
    rows = dict(bug_views.rows(bug))
    assert rows["trigger"] == "fails when: a causal mask alone" and rows["known finding"] == "f1 (expected: --known)"
    assert "verdict" not in rows and "kernel" not in rows  # the title's fields, said in the title
    text = bug_views.text(bug)
    assert text.startswith("KNOWN FINDING f1 pallas_flash, shrunk to: ")
    assert text.count("5.00e-05") == 1 and text.count("replay: python -m harness repro f/x.json") == 1
    message, word, said = bug_views.junit(bug)
    assert (message, word, said) == (bug.failure, "failure", text)


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        pytest.param([], "a bug is a JSON object", id="not-an-object"),
        pytest.param({"kernel": "k", "verdict": "failure"}, "missing fields ['shrunk_case']", id="missing"),
        pytest.param({"kernel": "k", "verdict": "v", "shrunk_case": "c", "x": 1}, "unknown fields ['x']", id="unknown"),
    ],
)
def test_a_bad_bug_document_is_one_line_naming_the_field(doc: object, said: str) -> None:
    with pytest.raises(RecordError, match=re.escape(said)):
        Bug.from_json(doc)
