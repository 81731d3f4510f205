"""harness/store/counts.py through every view: one bug counted the same by the terminal, `run --json`,
`run --junitxml` and the HTML report (bugs, failing drawn cases, the shrunk case apart). Once from built records
(fast), once from one planted-bug run through the real CLI (a search of the interpreted kernel)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import console, main, results
from harness.core.summary import KernelSummary
from harness.gate import thresholds
from harness.report import data
from harness.running.session import RunOutcome
from harness.store import counts as counting
from harness.store.failures import FailureRecord
from harness.store.read import load
from tests import record_builders as rb

KERNEL = "tests.planted.fwd_causal_off_by_one:flash_attention"
# "1 bug; 1 failing case of 4 drawn", as every view words the counts (counts.headline).
HEADLINE = re.compile(r"(\d+) bugs?; (\d+) failing cases?(?: \(\d+ flaky\))? of (\d+) drawn")


@dataclasses.dataclass(frozen=True)
class Views:
    code: int
    terminal: str
    summary: dict
    junit: ET.Element
    html: str


def _main(*argv: object) -> tuple[int, str]:
    """A command through the CLI's entry point (`python -m harness` calls it), in this process: its exit code and
    what it printed. No Python of its own to start: the kernel runs in the run's worker process either way."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main([str(a) for a in argv])
    return code, printed.getvalue()


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> Views:
    """One run of the planted bug and its report, every view the tests read. Two drawn cases: the first smoke case
    (causal) fails on the bug and the second passes, so drawn, failing and shrunk cases all differ."""
    d = tmp_path_factory.mktemp("views")
    code, terminal = _main(
        "run", "--kernel", KERNEL, "--examples", "2", "--jobs", "1", "--no-grads", "--no-database",
        "--junitxml", d / "j.xml", "--json", d / "s.json", "--out", d / "store",
    )  # fmt: skip
    reported, said = _main("report", "--store", d / "store", "--out", d / "r.html")
    assert reported == 1, said
    return Views(
        code=code,
        terminal=terminal,
        summary=json.loads((d / "s.json").read_text()),
        junit=ET.parse(d / "j.xml").getroot(),
        html=(d / "r.html").read_text(),
    )


def _headline(text: str) -> tuple[int, int, int]:
    found = HEADLINE.search(text)
    assert found is not None, text[:2000]
    bugs, failing, drawn = map(int, found.groups())
    return bugs, failing, drawn


def _banner(html: str) -> str:
    return html.split('<div id="verdict"', 1)[1].split("</div>\n  <nav>", 1)[0]


def test_one_planted_bug_run_counts_the_same_in_every_view(views):
    # One test, so that the run is made once whatever worker takes it (xdist).
    _the_planted_bug_is_one_bug_and_the_json_counts_drawn_cases_apart_from_its_shrunk_case(views)
    _terminal_json_junit_and_report_give_the_same_counts(views)
    _the_report_banner_names_the_kernel_the_trigger_and_the_replay(views)


def _the_planted_bug_is_one_bug_and_the_json_counts_drawn_cases_apart_from_its_shrunk_case(views):
    assert views.code == 1, views.terminal
    (row,) = views.summary["kernels"]
    counts = views.summary["counts"]
    assert counts["bugs"] == len(views.summary["failures"]) == 1
    # The summary row counts drawn cases; the shrunk case is the bug's, never one more failing case.
    assert (counts["drawn_cases"], counts["failing_cases"]) == (row["examples"], row["failed"])
    assert views.summary["cases"] == {"checked": row["examples"], "failed": row["failed"], "flaky": 0, "shrunk": 1}
    assert counts["failing_cases"] >= 1


def _terminal_json_junit_and_report_give_the_same_counts(views):
    counts = views.summary["counts"]
    want = (counts["bugs"], counts["failing_cases"], counts["drawn_cases"])
    assert _headline(views.terminal.split("\nverdict: ", 1)[1]) == want
    assert _headline(_banner(views.html)) == want
    bugs, failing, _ = want
    nav = f"Failures ({bugs} bug{'s' if bugs != 1 else ''}, {failing} failing case{'s' if failing != 1 else ''})"
    assert nav in views.html
    # JUnit: one red testcase per bug, one green one per drawn case that passed, and no exit-status row (the bug's
    # testcase shows why the run failed).
    (suite,) = [s for s in views.junit.iter("testsuite") if s.get("name") == KERNEL]
    red = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    green = [c for c in suite.iter("testcase") if c.find("failure") is None and c.find("skipped") is None]
    assert len(red) == bugs and all(c.get("name").startswith("bug: ") for c in red)
    assert len(green) == counts["drawn_cases"] - failing
    assert views.junit.get("failures") == str(bugs) and "exit status" not in ET.tostring(views.junit, "unicode")
    # The report's per-version table counts the same drawn and failing cases, and the bugs.
    row = re.search(re.escape(KERNEL) + r"</td><td>[^<]*</td>(.*?)</tr>", views.html, re.S)
    assert row is not None
    cells = [int(x) for x in re.findall(r'<td class="num[^"]*">(\d+)</td>', row.group(1))[:3]]
    assert cells == [counts["drawn_cases"], failing, bugs]


def _the_report_banner_names_the_kernel_the_trigger_and_the_replay(views):
    (failure,) = views.summary["failures"]
    banner = _banner(views.html)
    assert KERNEL in banner and "causal" in failure["trigger"] and failure["trigger"] in banner
    assert failure["replay"] in banner
    assert "1 run," in views.html and "1 runs" not in views.html


# --- from built records: two shards shrank the one bug, one drawn case of four failed ---

RUN = "20261207T100000Z-host-aaaaaa"
TRIGGER = "fails when: a causal_top_left mask alone; passes without it"


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "s"
    bug = store / "failures" / "bug.json"
    bug.parent.mkdir(parents=True)
    shrunk = rb.case(9, causal=True)
    doc = FailureRecord(
        kernel="pallas_flash", oracles=("torch_sdpa",), grads=False, case=shrunk.to_json(),
        search={"trigger_words": TRIGGER},
    )  # fmt: skip
    bug.write_text(json.dumps(doc.to_json()))
    recs = [rb.run_record(RUN, summary=[])]  # no summary rows: the records are counted
    recs += [rb.case_record(RUN, rb.case(s), fail_quantity="out" if s == 1 else None) for s in range(4)]
    for c in (shrunk, rb.case(8, causal=True)):  # the second shard's shrunk case, pointed at the same file
        recs.append(rb.case_record(RUN, c, fail_quantity="out", shrunk=True, failure_file=str(bug)))
    return rb.write_store(store, recs)


def test_built_records_count_one_bug_and_one_failing_drawn_case_in_every_view(tmp_path):
    store = _store(tmp_path)
    records = load([store])
    tally = counting.count(records)
    assert (len(tally.bugs), tally.failing, tally.drawn) == (1, 1, 4)
    assert tally.bugs[0].trigger == TRIGGER and tally.bugs[0].replay.endswith("bug.json")
    row = KernelSummary(kernel="pallas_flash", examples=4, failed=1, worst=5.0, seconds=4.0, status="FAIL")
    outcome = RunOutcome(code=1, rows=(row,), records=store / "records" / RUN, out=store)
    want = (1, 1, 4)
    assert _headline(console.outcome_text(outcome, tally)) == want
    summary = results.summary(outcome, records, tally)
    assert (summary["counts"]["bugs"], summary["cases"]["failed"], summary["cases"]["checked"]) == want
    junit = results.junit(outcome, records, tally)
    assert (junit.get("tests"), junit.get("failures")) == ("4", "1")  # the bug, and the three drawn cases that passed
    report = data.build(records, thresholds=thresholds.load())
    assert _headline(report.verdict.headline) == want and report.nav_failures == "1 bug, 1 failing case"
    assert any("pallas_flash" in d and TRIGGER in d for d in report.verdict.details)
    (kernel_row,) = [r for r in report.correctness if r.implementation == "pallas_flash"]
    assert (kernel_row.cases, kernel_row.failed, report.version_bugs[("pallas_flash", kernel_row.env)]) == (4, 1, 1)


def test_a_run_that_failed_with_no_bug_or_failing_case_keeps_its_exit_status_testcase(tmp_path):
    store = rb.write_store(tmp_path / "s", [rb.run_record(RUN, summary=[]), rb.case_record(RUN, rb.case(0))])
    records = load([store])
    row = KernelSummary(kernel="pallas_flash", examples=1, failed=0, worst=0.3, seconds=1.0, status="INTERRUPTED")
    outcome = RunOutcome(code=1, rows=(row,), records=store / "records" / RUN, out=store, interrupted=True)
    junit = results.junit(outcome, records, counting.count(records))
    names = [c.get("name") for c in junit.iter("testcase") if c.find("failure") is not None]
    assert names == ["exit status"] and junit.get("failures") == "1"


def test_a_summary_row_that_says_fewer_failures_than_the_records_never_counts_a_failing_record_away(tmp_path):
    row = {"kernel": "pallas_flash", "examples": 2, "failed": 0, "seconds": 1.0, "status": "PASS", "worst": 0.3}
    recs = [rb.run_record(RUN, summary=[row])]
    recs += [rb.case_record(RUN, rb.case(s), fail_quantity="out" if s == 1 else None) for s in range(3)]
    tally = counting.count(load([rb.write_store(tmp_path / "s", recs)]))
    assert (tally.drawn, tally.failing, len(tally.bugs)) == (3, 1, 0)


@pytest.mark.parametrize(("n", "word", "said"), [(0, "bug", "0 bugs"), (1, "bug", "1 bug"), (2, "run", "2 runs")])
def test_plural(n, word, said):
    assert counting.plural(n, word) == said
