"""`--junitxml FILE` and `--json FILE` of `run` and `upgrade`: a finished run or gate as a CI system reads it.

Built from the run's outcome (exit status, summary rows) and its records, read back from the store
through their typed classes (harness.store.read): a case's verdict is its record's (`passed`, `flaky`),
so what a record says is what CI shows. Computing (`summary`, `junit`) is apart from writing (`write`).

JUnit XML: one testsuite per kernel, one testcase per case record of it (the failure's text: the error
table, where the error sits, and the replay command of the shrunk failure's file); a failure the run
expects (--known) is skipped; a kernel that cannot run here is one error. A last testsuite, "run", holds
one testcase, "exit status", that fails unless the run exits 0: CI is red exactly when the run is.

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
from harness.store import derive, read
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
    if junitxml is not None:
        tree = ET.ElementTree(junit(outcome, records))
        ET.indent(tree)
        tree.write(junitxml, encoding="utf-8", xml_declaration=True)
    if json_path is not None:
        json_path.write_text(json.dumps(summary(outcome, records), indent=2, default=str) + "\n")


def run_records(outcome: RunOutcome) -> read.Records:
    """The run's records: its own directory, or (a --jobs run) its workers' runs in the shared store."""
    records = read.load([outcome.records])
    if outcome.merged is not None:
        records = records.subset(set(outcome.merged.run_ids))
    return records


def _kernel_records(records: read.Records) -> list[CaseRecord]:
    """The kernels' case records (oracles' findings are reported apart, never as a kernel's case)."""
    return sorted((r for r in records.cases if r.role != "oracle"), key=lambda r: (r.implementation, r.time or ""))


def verdict(rec: CaseRecord) -> verdicts.Verdict:
    """A kernel's case record's verdict word (harness.core.verdicts), from the record's own fields."""
    if rec.passed:
        return verdicts.Verdict.DIVERGENCE if rec.divergence else verdicts.Verdict.PASS
    return verdicts.Verdict.FLAKY_FAILURE if rec.flaky else verdicts.Verdict.FAILURE


def failure_text(rec: CaseRecord, path: str | None) -> str:
    """A failing record in words: the case, the error table, where the errors sit, and the replay command."""
    located = Located.from_json(rec.located) if isinstance(rec.located, dict) else None
    # comparison_table reads the fields a record shares with a live result (implementation, backend,
    # empty_rows, error, comparisons).
    table = console.comparison_table(rec, rec.dtype or "") + strips.appendix(located)
    lines = [f"{verdict(rec)}: {derive.case_text(rec.case)}", table]
    replay = derive.repro_command(path)
    lines += [f"  replay: {replay}"] if replay else []
    return "\n".join(lines)


def _failures(outcome: RunOutcome, records: read.Records) -> list[dict[str, Any]]:
    """Each reported failure (a record with its failure file): the case, why, the file and its replay."""
    out = []
    for rec in _kernel_records(records):
        if rec.passed or not rec.failure_file:
            continue
        path, doc = derive.failure_doc(rec, records.roots)
        found = derive.found(doc)
        out.append(
            {
                "kernel": rec.implementation,
                "case_id": rec.case_id,
                "case": rec.case,
                "verdict": str(verdict(rec)),
                "failure": derive.failure_line(rec),
                "file": path,
                "replay": derive.repro_command(path),
                "trigger": found.trigger_words,
                "finding": found.finding,
                "inherited_from": found.inherited_from,
                "expected": found.expected,
            }
        )
    return out


def summary(outcome: RunOutcome, records: read.Records) -> dict[str, Any]:
    """The run as plain data (`run --json`): verdict, exit status, kernels, cases, failures and findings."""
    kernel_records = _kernel_records(records)
    failures = _failures(outcome, records)
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
        "cases": {
            "checked": len(kernel_records),
            "failed": sum(not r.passed for r in kernel_records),
            "flaky": sum(r.flaky for r in kernel_records),
        },
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


def junit(outcome: RunOutcome, records: read.Records) -> ET.Element:
    """The run as JUnit XML (`run --junitxml`)."""
    root = ET.Element("testsuites", name="attention-harness")
    by_kernel: dict[str, list[CaseRecord]] = {}
    for rec in _kernel_records(records):
        by_kernel.setdefault(rec.implementation, []).append(rec)
    rows = {r.kernel: r for r in outcome.rows if r.is_kernel}
    for kernel in sorted(set(by_kernel) | set(rows)):
        _suite(root, kernel, by_kernel.get(kernel, []), rows.get(kernel), records)
    _run_suite(root, outcome)
    for attr in ("tests", "failures", "errors", "skipped"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in root)))
    return root


def _suite(
    root: ET.Element, kernel: str, recs: list[CaseRecord], row: KernelSummary | None, records: read.Records
) -> None:
    suite = ET.SubElement(root, "testsuite", name=kernel)
    if row is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="status", value=str(row.status))
    expected = row is not None and row.status == KernelStatus.KNOWN_FAIL
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for rec in recs:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=kernel,
            name=f"{derive.case_text(rec.case)} [{rec.case_id}]",
            time=f"{rec.seconds or 0.0:.3f}",
        )
        counts["tests"] += 1
        seconds += rec.seconds or 0.0
        if rec.passed:
            if rec.divergence:
                note = f"{verdicts.Verdict.DIVERGENCE}: {derive.interpreters_line(rec)}"
                ET.SubElement(case, "system-out").text = note
            continue
        path, _ = derive.failure_doc(rec, records.roots)
        if expected:
            ET.SubElement(case, "skipped", message=f"expected (--known): {derive.failure_line(rec)}")
            counts["skipped"] += 1
            continue
        failure = ET.SubElement(case, "failure", message=derive.failure_line(rec), type=str(verdict(rec)))
        failure.text = failure_text(rec, path)
        counts["failures"] += 1
    if row is not None and row.status == KernelStatus.CANNOT_RUN:
        case = ET.SubElement(suite, "testcase", classname=kernel, name="cannot run here", time="0")
        ET.SubElement(case, "error", message=f"{kernel} cannot run here: {row.error}", type=str(row.status))
        counts["tests"] += 1
        counts["errors"] += 1
    for attr, n in counts.items():
        suite.set(attr, str(n))
    suite.set("time", f"{seconds:.3f}")


def _run_suite(root: ET.Element, outcome: RunOutcome) -> None:
    """The run's own verdict as one testcase: failed (exit 1), an error (any other non-zero exit), or passed."""
    suite = ET.SubElement(root, "testsuite", name="run", tests="1", failures="0", errors="0", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="run", name="exit status", time="0")
    word = _run_word(outcome)
    if outcome.code != EXIT_OK:
        kind = "failure" if outcome.code == EXIT_FAIL else "error"
        element = ET.SubElement(case, kind, message=f"exit status {outcome.code}: {word}", type=word)
        element.text = console.outcome_text(outcome).strip()
        suite.set("failures" if kind == "failure" else "errors", "1")
    ET.SubElement(case, "system-out").text = console.summary_table(list(outcome.rows))


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
