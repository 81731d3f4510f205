"""`--junitxml FILE` and `--json FILE` of `run` and `upgrade`: a finished run or gate as a CI system reads it.

Built from the run's outcome (exit status, summary rows) and its records, read back from the store
through their typed classes (harness.store.read): a case's verdict is its record's (`passed`, `flaky`),
so what a record says is what CI shows. Computing (`summary`, `junit`) is apart from writing (`write`).

Both count what harness.store.counts counts, as the terminal and the report do: bugs, failing drawn cases,
and the shrunk case of each bug apart (never another failure). A bug is one value (harness.store.bug.Bug): the JSON
lists its fields, JUnit its text.

JUnit XML: one testsuite per kernel: one failing testcase per bug (the bug as harness.store.bug_views words it
for every view: its error table, where the error sits, its trigger, the drawn cases it explains, its replay; a
bug the run expects, --known, is skipped), one passing testcase per drawn case that passed; a kernel with failing
drawn cases and no bug (stopped before shrinking) has one failing testcase per such case; a kernel that
cannot run here is one error. A last testsuite, "run", holds one testcase, "exit status", only where the
run failed for a reason no testcase above shows (interrupted, an expected finding that passes now, ...):
CI is red exactly when the run is, with one red row per bug.

The upgrade gate's JUnit XML has one testsuite per category of its rows (correctness, compile, speed, ...)
and one testcase per row: a regression fails, a check not compared is skipped with its reason; its JSON
is the verdict, the kernels each side ran, the regressions with their evidence and every group of rows.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.cli import console
from harness.core import strips, verdicts
from harness.core.errors import InputError
from harness.core.exit_codes import EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_OK
from harness.core.locate import Located
from harness.core.summary import KernelSummary
from harness.gate import GateResult, Group, Row
from harness.gate.verdict import Verdict as GateVerdict
from harness.running.session import RunOutcome
from harness.store import bug_views, derive, read
from harness.store import counts as counting
from harness.store.bug import Bug
from harness.store.records import CaseRecord
from harness.store.schema import KernelStatus

SUMMARY_SCHEMA = 1
# The run's verdict word (harness.core.verdicts), by its exit status; an interrupted run exits 1 too. A harness
# failure (exit 3) ends the command before any file is written.
RUN_VERDICTS = {
    EXIT_OK: verdicts.Verdict.PASS,
    EXIT_FAIL: verdicts.Verdict.FAILURE,
    EXIT_CANNOT_RUN: verdicts.Verdict.CANNOT_RUN,
}


def add_arguments(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, *, what: str = "run", defaults: tuple[str, str] | None = None
) -> None:
    """--junitxml FILE and --json FILE, as `run` and `upgrade` take them; defaults: where each is written
    when not given (None: not written)."""
    junit, summary = defaults or (None, None)
    p.add_argument(
        "--junitxml",
        type=Path,
        metavar="FILE",
        help=f"write the {what} as JUnit XML, for CI" + (f" (default {junit})" if junit else ""),
    )
    p.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help=f"write the {what}'s verdict, kernels, failures and findings as JSON"
        + (f" (default {summary})" if summary else ""),
    )


def check_writable(path: Path | None, option: str) -> None:
    """Bad input (exit 2), said before any case runs: a `path` whose directory does not exist, or a directory."""
    if path is None:
        return
    if path.is_dir():
        raise InputError(f"{option}={str(path)!r} is a directory; give a file name")
    if not path.parent.is_dir():
        raise InputError(f"{option}={str(path)!r}: directory {str(path.parent)!r} does not exist; create it first")


def write(outcome: RunOutcome, *, junitxml: Path | None = None, json_path: Path | None = None) -> None:
    """Write the files asked for."""
    if junitxml is None and json_path is None:
        return
    records = run_records(outcome)
    counts = counting.count(records)
    if junitxml is not None:
        tree = ET.ElementTree(junit(outcome, records, counts))
        ET.indent(tree)
        tree.write(junitxml, encoding="utf-8", xml_declaration=True)
    if json_path is not None:
        json_path.write_text(json.dumps(summary(outcome, records, counts), indent=2, default=str) + "\n")


def run_records(outcome: RunOutcome) -> read.Records:
    """The run's records: its own directory, or (a --jobs run) its workers' runs in the shared store."""
    return counting.run_records(outcome.records, set(outcome.merged.run_ids) if outcome.merged is not None else None)


def _kernel_records(records: read.Records) -> list[CaseRecord]:
    """The kernels' case records (oracles' findings are reported apart, never as a kernel's case)."""
    return sorted((r for r in records.cases if r.role != "oracle"), key=lambda r: (r.implementation, r.time or ""))


def verdict(rec: CaseRecord) -> verdicts.Verdict:
    """A kernel's case record's verdict word (harness.core.verdicts), from the record's own fields."""
    if rec.passed:
        return verdicts.Verdict.DIVERGENCE if rec.divergence else verdicts.Verdict.PASS
    return verdicts.Verdict.FLAKY_FAILURE if rec.flaky else verdicts.Verdict.FAILURE


def failure_text(rec: CaseRecord) -> str:
    """A failing drawn case no bug stands for (stopped before shrinking), in words: the case, its error table and
    where its errors sit."""
    located = Located.from_json(rec.located) if isinstance(rec.located, dict) else None
    table = bug_views.error_table(rec, rec.dtype or "") + strips.appendix(located)
    return "\n".join([f"{verdict(rec)}: {derive.case_text(rec.case)}", table])


def _failures(counts: counting.Counts) -> list[dict[str, Any]]:
    """Each bug (harness.store.bug.Bug), every field of it."""
    return [bug_views.to_json(bug) for bug in counts.bugs]


def run_counts(outcome: RunOutcome) -> counting.Counts:
    """What the run's verdict counts (harness.store.counts), from its records."""
    return counting.count(run_records(outcome))


def summary(outcome: RunOutcome, records: read.Records, counts: counting.Counts) -> dict[str, Any]:
    """The run as plain data (`run --json`): verdict, exit status, its counts, kernels, cases, bugs and findings.
    "cases" counts drawn cases (the shrunk case of each bug is "shrunk", never a failed case); "failures" is
    one entry per bug."""
    failures = _failures(counts)
    rows = list(outcome.rows)
    return {
        "schema": SUMMARY_SCHEMA,
        "verdict": _run_word(outcome),
        "exit_code": outcome.code,
        "interrupted": outcome.interrupted,
        "store": str(outcome.out),
        "records": str(outcome.records),
        "run_ids": sorted(records.run_ids),
        "kernels": [r.to_json() for r in rows if r.is_kernel],
        "counts": counts.to_json(),
        "cases": {"checked": counts.drawn, "failed": counts.failing, "flaky": counts.flaky, "shrunk": len(counts.bugs)},
        "failures": failures,
        "findings": {
            "oracle": [r.to_json() for r in rows if r.oracle and r.failed],
            "interpreter_divergence": [r.to_json() for r in rows if r.divergence and r.failed],
            "known": [f for f in failures if f["finding"]],
            "inherited": [f for f in failures if f["inherited_from"]],
            "unexpected_passes": list(outcome.unexpected_passes),
        },
        "incomplete": records.incomplete() + list(outcome.merged.lost if outcome.merged is not None else ()),
    }


def _run_word(outcome: RunOutcome) -> str:
    if outcome.interrupted:
        return str(KernelStatus.INTERRUPTED)
    return str(RUN_VERDICTS.get(outcome.code, f"exit {outcome.code}"))


def junit(outcome: RunOutcome, records: read.Records, counts: counting.Counts) -> ET.Element:
    """The run as JUnit XML (`run --junitxml`): one red testcase per bug, one green one per drawn case that passed."""
    root = ET.Element("testsuites", name="attention-harness")
    by_kernel: dict[str, list[CaseRecord]] = {}
    for rec in _kernel_records(records):
        by_kernel.setdefault(rec.implementation, []).append(rec)
    rows = {r.kernel: r for r in outcome.rows if r.is_kernel}
    for kernel in sorted(set(by_kernel) | set(rows)):
        _suite(root, by_kernel.get(kernel, []), rows.get(kernel), counts.of(kernel))
    shown = sum(int(s.get("failures", "0")) + int(s.get("errors", "0")) for s in root)
    if outcome.code != EXIT_OK and (not shown or outcome.interrupted or outcome.unexpected_passes):
        _run_suite(root, outcome, counts)
    for attr in ("tests", "failures", "errors", "skipped"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in root)))
    return root


def _testcase(suite: ET.Element, name: str, seconds: float | None) -> ET.Element:
    suite.set("tests", str(int(suite.get("tests", "0")) + 1))
    suite.set("time", f"{float(suite.get('time', '0')) + (seconds or 0.0):.3f}")
    return ET.SubElement(suite, "testcase", classname=suite.get("name", ""), name=name, time=f"{seconds or 0.0:.3f}")


def _mark(suite: ET.Element, case: ET.Element, kind: str, message: str, **attrs: str) -> ET.Element:
    """`case` failed, errored or was skipped (`kind`), counted on its suite."""
    counter = {"failure": "failures", "error": "errors", "skipped": "skipped"}[kind]
    suite.set(counter, str(int(suite.get(counter, "0")) + 1))
    return ET.SubElement(case, kind, message=message, **attrs)


def _suite(root: ET.Element, recs: list[CaseRecord], row: KernelSummary | None, kc: counting.KernelCounts) -> None:
    """One kernel: its bugs (or, with none, its failing drawn cases), its passing drawn cases, and whether it runs."""
    suite = ET.SubElement(root, "testsuite", name=kc.kernel, tests="0", failures="0", errors="0", skipped="0")
    if row is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="status", value=str(row.status))
    expected = row is not None and row.status == KernelStatus.KNOWN_FAIL
    drawn = [r for r in recs if not r.shrunk]
    failing = [r for r in drawn if not r.passed]
    shrunk = {r.case_id: r for r in recs if r.shrunk}
    for bug in kc.bugs:
        _bug_case(suite, bug, shrunk.get(bug.case_id), expected=expected or bug.expected)
    for rec in failing if not kc.bugs else []:  # failing drawn cases no bug stands for (stopped before shrinking)
        case = _testcase(suite, f"{derive.case_text(rec.case)} [{rec.case_id}]", rec.seconds)
        if expected:
            _mark(suite, case, "skipped", f"expected (--known): {derive.failure_line(rec)}")
        else:
            _mark(suite, case, "failure", derive.failure_line(rec), type=str(verdict(rec))).text = failure_text(rec)
    for rec in (r for r in drawn if r.passed):
        case = _testcase(suite, f"{derive.case_text(rec.case)} [{rec.case_id}]", rec.seconds)
        if rec.divergence:
            note = f"{verdicts.Verdict.DIVERGENCE}: {derive.interpreters_line(rec)}"
            ET.SubElement(case, "system-out").text = note
    if row is not None and row.status == KernelStatus.CANNOT_RUN:
        case = _testcase(suite, "cannot run here", 0.0)
        _mark(suite, case, "error", f"{kc.kernel} cannot run here: {row.error}", type=str(row.status))


def _bug_case(suite: ET.Element, bug: Bug, rec: CaseRecord | None, *, expected: bool) -> None:
    """One bug as one testcase (harness.store.bug_views: its name, message, verdict word and text)."""
    case = _testcase(suite, bug_views.testcase_name(bug), rec.seconds if rec is not None else None)
    message, word, text = bug_views.junit(bug)
    if expected:
        _mark(suite, case, "skipped", f"expected (--known): {message}")
        return
    _mark(suite, case, "failure", message, type=word).text = text


def _run_suite(root: ET.Element, outcome: RunOutcome, counts: counting.Counts) -> None:
    """The run's own verdict as one testcase, where no testcase above shows why it failed: a failure (exit 1) or
    an error (any other non-zero exit)."""
    suite = ET.SubElement(root, "testsuite", name="run", tests="1", failures="0", errors="0", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="run", name="exit status", time="0")
    word = _run_word(outcome)
    kind = "failure" if outcome.code == EXIT_FAIL else "error"
    element = ET.SubElement(case, kind, message=f"exit status {outcome.code}: {word}", type=word)
    element.text = console.outcome_text(outcome, counts).strip()
    suite.set("failures" if kind == "failure" else "errors", "1")
    ET.SubElement(case, "system-out").text = console.summary_table(list(outcome.rows), counts)


# --- The upgrade gate ---


def write_gate(
    v: GateVerdict,
    result: GateResult,
    *,
    kernels: dict[str, str],
    junitxml: Path,
    json_path: Path,
    versions: dict[str, dict[str, str | None]] | None = None,
) -> None:
    """The gate's verdict and rows as JUnit XML and JSON; kernels: each kernel asked for, where it is registered;
    versions: side -> the library versions (and Python) it ran with."""
    tree = ET.ElementTree(gate_junit(v, result))
    ET.indent(tree)
    tree.write(junitxml, encoding="utf-8", xml_declaration=True)
    summary = gate_summary(v, result, kernels=kernels, versions=versions)
    json_path.write_text(json.dumps(summary, indent=2, default=str) + "\n")


def _row_json(r: Row) -> dict[str, Any]:
    return {
        "category": r.category,
        "subject": r.subject,
        "status": str(r.status),
        "baseline": r.baseline,
        "candidate": r.candidate,
        "change": r.change,
        "detail": r.detail,
    }


def gate_summary(
    v: GateVerdict,
    result: GateResult,
    *,
    kernels: dict[str, str],
    versions: dict[str, dict[str, str | None]] | None = None,
) -> dict[str, Any]:
    """The upgrade as plain data (`upgrade --json`)."""
    return {
        "schema": SUMMARY_SCHEMA,
        "verdict": v.headline.split(":", 1)[0],  # SAFE, NOT SAFE or CANNOT TELL (harness.gate.verdict)
        "headline": v.headline,
        "exit_code": v.code,
        "baseline": result.baseline,
        "candidate": result.candidate,
        "thresholds": result.thresholds,
        "kernels": kernels,
        "versions": versions or {},
        "failures": [_row_json(r) for r in result.failures],
        "findings": {str(g): list(lines) for g, lines in v.groups.items()},
    }


def gate_junit(v: GateVerdict, result: GateResult) -> ET.Element:
    """The upgrade as JUnit XML (`upgrade --junitxml`): a testcase per gate row, and the verdict last."""
    root = ET.Element("testsuites", name="attention-harness upgrade")
    by_category: dict[str, list[Row]] = {}
    for r in result.rows:
        by_category.setdefault(r.category, []).append(r)
    for category, rows in by_category.items():
        suite = ET.SubElement(root, "testsuite", name=category)
        counts = {"tests": len(rows), "failures": 0, "errors": 0, "skipped": 0}
        for r in rows:
            case = ET.SubElement(suite, "testcase", classname=category, name=r.subject, time="0")
            figures = f"{r.status}: {r.change} (baseline {r.baseline}, candidate {r.candidate})"
            if r.fails:
                ET.SubElement(case, "failure", message=figures, type=str(r.status)).text = r.detail or figures
                counts["failures"] += 1
            elif r.group == Group.NOT_COMPARED:
                ET.SubElement(case, "skipped", message=f"{figures}: {r.detail}" if r.detail else figures)
                counts["skipped"] += 1
            else:
                ET.SubElement(case, "system-out").text = figures
        for attr, n in counts.items():
            suite.set(attr, str(n))
    suite = ET.SubElement(root, "testsuite", name="upgrade", tests="1", failures="0", errors="0", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="upgrade", name="verdict", time="0")
    if v.code != EXIT_OK:
        kind = "failure" if v.code == EXIT_FAIL else "error"
        ET.SubElement(case, kind, message=v.headline, type=v.headline.split(":", 1)[0]).text = "\n".join(v.lines())
        suite.set("failures" if kind == "failure" else "errors", "1")
    for attr in ("tests", "failures", "errors", "skipped"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in root)))
    return root
