"""Results store: records from several machines merge into one without loss or collision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.case import Case
from harness.core.locate import Located, Strip
from harness.running.runner import CaseResult, SubjectResult
from harness.store.failures import FailureRecord
from harness.store.files import MergeError, RunStore, iter_records, merge_stores
from harness.store.records import BenchRecord

CASE = Case(batch=1, q_heads=2, kv_heads=2, q_len=128, kv_len=128, head_dim=64)


def _bench(run_id: str, seconds: float) -> BenchRecord:
    return BenchRecord(
        run_id=run_id, implementation="pallas_flash", shape={"name": "tiny"}, pass_="fwd", samples=[seconds]
    )


def _machine_store(root: Path, host: str, seconds: float) -> RunStore:
    """A store as one CI job would leave it: run metadata and one case record, same case id everywhere."""
    store = RunStore.create(root, meta={"command": ["test"], "host_label": host})
    subject = SubjectResult(
        implementation="pallas_flash",
        role="kernel",
        backend="tpu_interpret",
        empty_rows="uniform",
        passed=True,
        comparisons=[],
        seconds=seconds,
    )
    store.write_case(CaseResult(case=CASE, subjects=[subject]))
    store.write(_bench(store.run_id, seconds))
    (root / "failures").mkdir(exist_ok=True)
    # A failure file as `run` writes it (merge reads each through FailureRecord), saying where it failed.
    failure = FailureRecord(
        kernel="pallas_flash", oracles=("torch_sdpa",), grads=True, case=CASE.to_json(), failure=host
    )
    (root / "failures" / f"{CASE.case_id}-abc123.json").write_text(json.dumps(failure.to_json()))
    return store


def test_two_machines_merge_without_loss(tmp_path: Path) -> None:
    a, b, dest = tmp_path / "a", tmp_path / "b", tmp_path / "merged"
    run_a = _machine_store(a, "machine-a", 1.0)
    run_b = _machine_store(b, "machine-b", 2.0)
    assert run_a.run_id != run_b.run_id

    report = merge_stores([a, b], dest)

    expected = sorted(list(iter_records(a)) + list(iter_records(b)), key=json.dumps)
    assert sorted(iter_records(dest), key=json.dumps) == expected  # nothing lost, nothing overwritten
    # Three records per run; the same case failed on both machines: both failure files are kept.
    assert report.copied == 3 * 2 + 2
    assert report.conflicts == [] and len(report.kept_both) == 1
    kept = sorted(json.loads(p.read_text())["failure"] for p in (dest / "failures").glob("*.json"))
    assert kept == ["machine-a", "machine-b"]
    cases = [r for r in iter_records(dest) if r["kind"] == "case"]
    assert sorted(r["seconds"] for r in cases) == [1.0, 2.0]  # same case id, both machines' results kept

    again = merge_stores([a, b], dest)  # merging twice is a no-op
    assert (again.copied, again.conflicts) == (0, [])


def test_a_changed_record_is_a_conflict_not_an_overwrite(tmp_path: Path) -> None:
    a, dest = tmp_path / "a", tmp_path / "merged"
    run = _machine_store(a, "machine-a", 1.0)
    merge_stores([a], dest)
    run.write(_bench(run.run_id, 9.0))
    report = merge_stores([a], dest)
    assert len(report.conflicts) == 1
    kept = json.loads((dest / "records" / run.run_id / "bench--pallas_flash--tiny--fwd.json").read_text())
    assert kept["samples"] == [1.0]


def test_merging_a_directory_that_is_not_a_store_says_so(tmp_path: Path) -> None:
    with pytest.raises(MergeError, match="not a results store"):
        merge_stores([tmp_path], tmp_path / "dest")


def test_where_the_errors_sit_is_kept_on_the_shrunk_failure_only(tmp_path):
    strip = Strip(quantity="out", axis="query", length=2, stride=1, bound=1.0, values=((0.5, 3.0),))
    located = Located(batch=0, per_batch=(3.0,), strips=(strip,))
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=2, kv_len=2, head_dim=4)
    subject = SubjectResult(
        implementation="k",
        role="kernel",
        backend="cpu",
        empty_rows="zeros",
        passed=False,
        comparisons=[],
        located=located,
    )
    store = RunStore.create(tmp_path, meta={})
    (example,) = store.write_case(CaseResult(case, [subject]))
    assert "located" not in json.loads(example.read_text())  # one of many met while shrinking: listed, not drawn
    (shrunk,) = store.write_case(CaseResult(case, [subject]), shrunk=True, failure_file="f.json")
    assert Located.from_json(json.loads(shrunk.read_text())["located"]) == located
