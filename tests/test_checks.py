"""The checks beyond the truth, as records carry them and `coverage` counts them (cells.check_counts)."""

from __future__ import annotations

from harness.cli.commands.coverage import check_table
from harness.core.case import Case
from harness.store import cells
from harness.store.records import CaseRecord

CASE = Case(batch=2, q_heads=1, kv_heads=1, q_len=1, kv_len=64, head_dim=64, dtype="bfloat16")


def _record(case: Case, name: str = "pallas_paged", **fields) -> CaseRecord:
    ids = {"run_id": "r", "case_id": case.case_id, "implementation": name}
    return CaseRecord(**ids, passed=True, comparisons=[], case=case.to_json(), **fields)


def test_each_kernel_counts_the_cases_each_check_ran_on_and_old_records_count_what_their_case_shows():
    megacore = CASE.replace(
        blocks={"page_size": 16, "pages_per_compute_block": 1, "spare_pages": 1, "megacore_batch": 1}, seed=1
    )
    extreme = CASE.replace(regime="near_max", seed=2)
    records = [
        _record(CASE, checks=["reproducible", "batch_invariant"]),
        _record(CASE, checks=["reproducible"]),  # the same case again (another interpreter's record): counted once
        _record(megacore, checks=["reproducible", "megacore"]),
        _record(extreme),  # written before CaseRecord.checks: its case shows the regime
        _record(CASE, name="torch_sdpa", role="oracle", checks=["reproducible"]),  # an oracle: not counted
    ]
    counts = cells.check_counts(records)
    assert counts == {
        "pallas_paged": {"cases": 3, "reproducible": 2, "batch_invariant": 1, "extreme_values": 1, "megacore": 1}
    }
    line = "pallas_paged: 3 cases; reproducible 2, batch_invariant 1, extreme_values 1, megacore 1"
    assert line in check_table(counts)


def test_a_record_without_checks_reads_and_writes_as_before():
    doc = _record(CASE).to_json()
    assert "checks" not in doc
    assert CaseRecord.from_json(doc).checks is None
    assert CaseRecord.from_json(_record(CASE, checks=["reproducible"]).to_json()).checks == ["reproducible"]
