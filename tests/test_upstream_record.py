"""harness.upstream.record: `fork-base --json`, the fork record in the store, and the report's fork section
(harness.report.fork) rendered from it. Forks are planted as in tests/test_fork_base.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.gate import thresholds
from harness.report import data, render
from harness.store.read import load
from harness.store.schema import RecordError
from harness.upstream import record
from harness.upstream.record import ForkRecord
from tests import record_builders as rb
from tests import test_fork_base

# The planted forks and the releases they were made from, as tests/test_fork_base.py plants them.
store, forks = test_fork_base.store, test_fork_base.forks
SPLASH_FORK = "pallas_splash=splash_0112:make_splash_mha"


@pytest.fixture
def examined(store: Path, forks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """`fork-base --json --no-replay` of the splash fork made from 0.11.2: the JSON it printed, and where."""
    out = tmp_path / "results"
    code = main(["fork-base", SPLASH_FORK, "--sources", str(store), "--no-replay", "--json", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    return {"doc": json.loads(printed), "err": err, "store": out}


def test_json_holds_the_base_the_drift_the_linked_hunks_and_each_bugs_verdict(examined: dict) -> None:
    doc = examined["doc"]
    assert (doc["kind"], doc["schema"], doc["fork"], doc["kernel"]) == ("fork_base", 1, SPLASH_FORK, "pallas_splash")
    assert (doc["base"]["release"], doc["base"]["changed"]) == ("0.11.2", 2)
    assert doc["drift"] == {"carried": 0, "missing": len(doc["hunks"]), "conflicts": 0}
    linked = [h for h in doc["hunks"] if h["links"]]
    assert [(h["arrived"], h["links"]) for h in linked] == [("0.12.0", [{"bug": "SPL-5", "by": "fix word"}])] * 2
    assert "-    dsinks = jnp.sum(sinks_exp.astype(o.dtype) * do * o)" in linked[0]["text"]
    (bug,) = doc["bugs"]
    assert (bug["id"], bug["fixed_in"], bug["verdict"], bug["why"]) == (
        "SPL-5",
        "0.12.0",
        "cannot tell here",
        "not replayed (--no-replay)",
    )
    assert (doc["replayed"], doc["code"]) == (False, 0)
    assert doc["verdict"] == "NOT REPLAYED (--no-replay): 1 upstream fixes after the base cannot be told"


def test_the_printed_json_is_the_record_written_to_the_store_and_reads_back(examined: dict) -> None:
    written = record.path_in(examined["store"], SPLASH_FORK)
    assert f"record -> {written}" in examined["err"]
    assert json.loads(written.read_text()) == examined["doc"]
    found, problems = record.read(examined["store"])
    assert problems == [] and [r.to_json() for r in found] == [examined["doc"]]
    assert isinstance(found[0], ForkRecord) and found[0].base.release == "0.11.2"


@pytest.mark.parametrize(
    "edit, message",
    [
        pytest.param(lambda d: d.update(schema=2), "record schema 2, this harness reads 1", id="newer-schema"),
        pytest.param(lambda d: d.update(kind="case"), "a 'case' record, expected 'fork_base'", id="another-kind"),
        pytest.param(lambda d: d.pop("drift"), "drift=None", id="no-drift"),
        pytest.param(lambda d: d["base"].update(changed="2"), "base: changed='2'", id="mistyped-base"),
        pytest.param(lambda d: d["bugs"][0].pop("verdict"), "bug 0: verdict=None", id="bug-without-verdict"),
        pytest.param(lambda d: d["hunks"].__setitem__(0, []), "hunk 0: [] is not a JSON object", id="bad-hunk"),
    ],
)
def test_a_record_that_does_not_read_names_the_key_and_the_fix(examined: dict, edit, message: str) -> None:
    doc = copy.deepcopy(examined["doc"])
    edit(doc)
    with pytest.raises(RecordError, match="^where: .*") as e:
        ForkRecord.from_json(doc, "where")
    assert message in str(e.value)


def test_the_report_shows_each_forks_base_drift_and_bug_table_from_its_record(examined: dict) -> None:
    store = rb.write_store(examined["store"], rb.environment("20261207T100000Z-ci-aaaaaa"))
    bad = store / record.FOLDER / "broken.json"
    bad.write_text("{")
    report = data.build(load([store]), thresholds=thresholds.load(), conventions=([], ""))
    (fork,) = report.forks.forks
    missing = len(examined["doc"]["hunks"])
    assert (fork.base, fork.drift) == ("0.11.2", [("carried", 0), ("missing", missing), ("conflicts", 0)])
    (problem,) = report.forks.problems
    assert problem.startswith(f"{bad}: unreadable (JSONDecodeError: ")
    html = render.render(report)
    assert '<section id="forks">' in html and '<a href="#forks">Forks (1)</a>' in html
    assert "Base: jax <b>0.11.2</b>: 2 lines changed (removed + added) against its 2644" in html
    assert f"0 carried, {missing} missing, 0 conflicts." in html and "arrived in 0.12.0: SPL-5</code>" in html
    assert "<td>SPL-5</td><td>0.12.0</td>" in html and "cannot tell here" in html
    assert "<b>NOT REPLAYED (--no-replay): 1 upstream fixes after the base cannot be told</b>" in html


def test_a_report_without_fork_records_has_no_fork_section(tmp_path: Path) -> None:
    store = rb.write_store(tmp_path / "s", rb.environment("20261207T100000Z-ci-aaaaaa"))
    html = render.render(data.build(load([store]), thresholds=thresholds.load(), conventions=([], "")))
    assert 'id="forks"' not in html and "#forks" not in html


@pytest.mark.slow
def test_json_of_a_replayed_fork_says_it_still_has_spl5_and_exits_1(
    store: Path, forks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    code = main(["fork-base", SPLASH_FORK, "--sources", str(store), "--json", "--out", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["code"], doc["replayed"]) == (1, 1, True)
    (bug,) = doc["bugs"]
    assert (bug["id"], bug["verdict"]) == ("SPL-5", "still has it")
    assert bug["command"].endswith(f"triggers/SPL-5.py {SPLASH_FORK}") and bug["why"].startswith("exit 1: ")
    assert doc["verdict"].startswith("FAIL: the fork still has SPL-5 (fixed upstream in 0.12.0")
    assert json.loads(record.path_in(out, SPLASH_FORK).read_text()) == doc
