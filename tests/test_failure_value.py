"""harness/store/bug.py and harness/store/bug_views.py: the failure as one typed value, rendered by one module.

A field added to the value (tests/planted_field.py: a labelled field, no view told of it) is found in the terminal,
`run --json`, JUnit, the HTML report's card and the pytest plugin's report of one planted bug; a fact the search
computes, added as a real one is (declared in harness/store/bug.py, computed in harness/running/settle.py), is found
in the failure file and in every view of `run` and `report`; and no other harness module declares or computes one."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.case import Case
from harness.store import bug_views
from harness.store.bug import Bug, Found
from harness.store.failures import FailureRecord
from harness.store.schema import RecordError
from tests import record_builders as rb
from tests.planted_field import FACT, TEXT, PlantedFound, plant
from tests.test_layers import modules

ROOT = Path(__file__).resolve().parent.parent
# A planted bug in a fake kernel (tests._fakes): NaN in every case's output, so its first case fails and the check
# costs milliseconds; the views render any failure file alike, an interpreted kernel's as this one's.
KERNEL = "tests._fakes:NAN"
SMOKE = "smoke[causal_top_left-float32-B1-H1-L16-D32]"  # a smoke case of it, which it fails


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted fields (tests/planted_field.py) in this process for one test, put back after it."""
    plant(monkeypatch.setattr)


def _python(*argv: object, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop("ATTN_HARNESS_PROFILE", None)
    command = [sys.executable, *map(str, argv)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_a_field_added_to_the_value_is_in_every_view(tmp_path: Path, planted: None, capsys) -> None:
    # `run` and `report` through the CLI's entry point in this process (no Python of their own to start); the
    # plugin's report from a pytest of its own. No smoke cases, no pool and no kernel worker: finding a fake
    # kernel's smoke set and starting a worker process cost more than the run.
    code = main([str(a) for a in (
        "run", "--kernel", KERNEL, "--examples", "1", "--jobs", "1", "--no-grads", "--no-database", "--no-smoke",
        "--no-pool", "--in-process", "--junitxml", tmp_path / "j.xml", "--json", tmp_path / "s.json",
        "--out", tmp_path / "store",
    )])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 1, printed.out + printed.err
    assert f"planted field: {TEXT}" in printed.out and f"planted search fact: {FACT}" in printed.out
    (failure,) = json.loads((tmp_path / "s.json").read_text())["failures"]
    assert (failure["planted"], failure["planted_fact"]) == (TEXT, FACT)
    assert json.loads(Path(failure["file"]).read_text())["search"]["planted_fact"] == FACT  # as settle wrote it
    (red,) = [c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase") if c.find("failure") is not None]
    assert f"planted field: {TEXT}" in red.find("failure").text
    assert f"planted search fact: {FACT}" in red.find("failure").text
    assert main(["report", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "r.html")]) == 1
    card = (tmp_path / "r.html").read_text().split('<section id="failures">', 1)[1]
    assert f"<dt>planted field</dt><dd>{TEXT}</dd>" in card
    assert f"<dt>planted search fact</dt><dd>{FACT}</dd>" in card
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


# --- a search fact: declared in one module, computed in one ---


def test_a_search_fact_is_read_as_strictly_as_a_real_one() -> None:
    """The planted fact (tests/planted_field.py) round-trips through the search section and is typed on load; a
    file whose search holds a fact this harness does not declare, or one of the wrong type, says which."""
    planted = PlantedFound(profile="ci", trigger=(), planted_fact=FACT)
    assert PlantedFound.from_json(json.loads(json.dumps(planted.to_json()))) == planted
    with pytest.raises(RecordError, match=r"f.json: search field planted_fact=3 must be a string"):
        PlantedFound.from_json({"planted_fact": 3}, "f.json")
    with pytest.raises(RecordError, match=r"f.json: unknown search fields \['planted_fact'\]"):
        Found.from_json({"planted_fact": FACT}, "f.json")
    with pytest.raises(RecordError, match=r"search field trigger_words=\['x'\] must be a string"):
        Found.of(_record(trigger_words=["x"]))


def test_every_searched_field_of_the_value_names_a_fact() -> None:
    facts = {f.name for f in dataclasses.fields(Found)}
    searched = {f.name: f.metadata["fact"] for f in dataclasses.fields(Bug) if "fact" in f.metadata}
    assert searched and set(searched.values()) <= facts
    for f in dataclasses.fields(Found):
        assert callable(f.metadata["ok"]) and f.metadata["want"], f.name


# Every harness module that names a search fact besides harness.store.bug, which declares each (Found) and labels
# it (Bug's `searched` fields), and what it sets. A fact the search computes is set in harness.running.settle alone:
# adding one touches those two modules. A module that reads the search section, declares facts or sets one and is
# not here fails the test below.
FACT_WRITERS: dict[str, set[str] | None] = {
    "harness.running.settle": None,  # every fact not set below: what the search computes
    "harness.running.jobs.same_bug": {"same_bug_as", "also_found"},  # a `run --jobs` merge of one bug's files
    "harness.api": {"found_by"},  # a failure `check` found
}


def _names(tree: ast.AST, facts: set[str]) -> tuple[bool, bool, bool, set[str]]:
    """(whether it imports Found, whether it declares facts (a field made by bug.fact, or a table of 3 or more facts),
    whether it reads a failure file's search section, the facts it sets by keyword in Found(...) or
    dataclasses.replace(...))."""
    nodes = list(ast.walk(tree))
    calls = [n for n in nodes if isinstance(n, ast.Call)]
    called = {id(c.func) for c in calls}
    named = {id(c): c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "") for c in calls}
    imports = any(isinstance(n, ast.ImportFrom) and "Found" in {a.name for a in n.names} for n in nodes)
    tables = [{k.value for k in n.keys if isinstance(k, ast.Constant)} for n in nodes if isinstance(n, ast.Dict)]
    declares = any(named[id(c)] == "fact" for c in calls) or any(len(keys & facts) >= 3 for keys in tables)
    reads = any(isinstance(n, ast.Attribute) and n.attr == "search" and id(n) not in called for n in nodes)
    sets = {k.arg for c in calls if named[id(c)] in {"Found", "replace"} for k in c.keywords if k.arg in facts}
    return imports, declares, reads, sets


def test_a_search_fact_is_declared_in_one_module_and_computed_in_one() -> None:
    facts = {f.name for f in dataclasses.fields(Found)}
    found: dict[str, set[str]] = {}
    for name, path in modules().items():
        if not name.startswith("harness") or name == "harness.store.bug":
            continue
        imports, declares, reads, sets = _names(ast.parse(path.read_text()), facts)
        assert not declares, f"{name} declares search facts: declare them in harness/store/bug.py (Found)"
        assert not reads, f"{name} reads a failure file's search section: read it with harness.store.bug.Found.of"
        if imports:
            found[name] = sets
    assert set(found) == set(FACT_WRITERS), "a module names Found: list it in FACT_WRITERS, or read the Bug"
    for name, want in FACT_WRITERS.items():
        assert want is None or found[name] == want, (name, sorted(found[name]))
    computed = found["harness.running.settle"]
    others = set().union(*(want for want in FACT_WRITERS.values() if want is not None))
    assert "trigger_words" in computed and not computed & others, sorted(computed)


@pytest.mark.parametrize(
    ("source", "said"),
    [
        pytest.param('TYPES = {"finding": 1, "trigger": 2, "needs": 3}', (False, True, False, set()), id="a-table"),
        pytest.param('x: str | None = fact(_str, "a string")', (False, True, False, set()), id="a-declared-fact"),
        pytest.param('words = record.search["trigger_words"]', (False, False, True, set()), id="reads-the-search"),
        pytest.param(
            "from harness.store.bug import Found\nf = dataclasses.replace(f, finding=name)",
            (True, False, False, {"finding"}),
            id="sets-a-fact",
        ),
    ],
)
def test_a_planted_fourth_place_is_found(source: str, said: tuple[bool, bool, bool, set[str]]) -> None:
    assert _names(ast.parse(source), {f.name for f in dataclasses.fields(Found)}) == said
