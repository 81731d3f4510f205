"""KernelSummary: a run.json summary row, its JSON round trip, and the rows earlier releases wrote."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from harness.core.compare import Comparison
from harness.core.errors import InputError
from harness.core.summary import KernelSummary, worst_used

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_every_summary_row_of_the_stored_fixtures_loads_and_writes_back_as_it_was() -> None:
    rows = [
        row
        for path in sorted(FIXTURES.glob("**/run.json"))
        for row in json.loads(path.read_text()).get("summary", [])
        if isinstance(row, dict) and row.get("kernel")
    ]
    assert rows, "no stored run.json with a kernel's summary row under tests/fixtures"
    for row in rows:
        assert KernelSummary.from_json(row).to_json() == row


def test_a_row_round_trips_with_every_optional_field() -> None:
    row = KernelSummary(
        kernel="k (fast vs faithful)", examples=3, failed=1, worst=None, seconds=2.0, status="INTERPRETER DIVERGENCE"
    )
    full = KernelSummary(
        kernel="k", examples=4, failed=0, worst=0.5, seconds=2.0, status="PASS", pairwise={"cases": 4}, error="why"
    )
    for r in (
        row,
        full,
        KernelSummary(kernel="o (oracle)", examples=1, failed=0, worst=0.1, seconds=1.0, status="PASS", oracle=True),
    ):
        assert KernelSummary.from_json(json.loads(json.dumps(r.to_json()))) == r
    assert (
        full.seconds_per_case == 0.5
        and KernelSummary.from_json({**full.to_json(), "examples": 0}).seconds_per_case is None
    )


def test_rows_of_skips_the_rows_of_other_commands_and_names_an_oracle_by_its_implementation() -> None:
    summary = [
        {"compiled": 3, "failed": 0, "status": "PASS"},  # a compile run's row
        {
            "kernel": "torch_sdpa (oracle)",
            "oracle": True,
            "examples": 2,
            "failed": 0,
            "worst": None,
            "seconds": 1.0,
            "status": "PASS",
        },
    ]
    (row,) = KernelSummary.rows_of(summary)
    assert row.name == "torch_sdpa" and not row.is_kernel
    assert KernelSummary.rows_of(None) == [] and KernelSummary.rows_of("garbage") == []


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param({"examples": 1}, "names no kernel", id="no-kernel"),
        pytest.param({"kernel": "k", "examples": 1}, "row of 'k' is unreadable (KeyError", id="missing-field"),
        pytest.param(
            {"kernel": "k", "examples": "x", "failed": 0, "worst": None, "seconds": 0.0, "status": "PASS"},
            "row of 'k' is unreadable (ValueError",
            id="bad-count",
        ),
    ],
)
def test_an_unreadable_row_says_which_and_why(doc: dict, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        KernelSummary.from_json(doc)


# --- the worst column agrees with the verdict beside it ---


@dataclasses.dataclass(frozen=True)
class _Judged:
    passed: bool
    comparisons: list[Comparison]


def _c(quantity: str, max_abs: float, bound: float, *, passed: bool | None = None) -> Comparison:
    passed = max_abs <= bound if passed is None else passed
    return Comparison(
        quantity=quantity, max_abs=max_abs, max_rel=max_abs, oracle_abs=1e-7, ratio=1.0, bound=bound, passed=passed
    )


def test_a_row_with_a_failure_shows_the_failing_worst_never_the_worst_of_its_passing_cases() -> None:
    passing = _Judged(True, [_c("out", 2.6e-6, 1e-5)])
    failing = _Judged(False, [_c("out", 1e-6, 1e-5), _c("dq", 0.95, 1e-5)])
    assert worst_used([passing]) == pytest.approx(0.26)
    assert worst_used([passing, failing]) == pytest.approx(9.5e4)


def test_a_non_finite_failure_or_one_without_a_bound_is_inf_and_a_failure_that_raised_is_none() -> None:
    nonfinite = _Judged(False, [_c("out", math.inf, 1e-5)])
    exact = _Judged(False, [_c("races", 3.0, 0.0)])  # an exact check: bound 0, failed by any difference
    raised = _Judged(False, [])
    passing = _Judged(True, [_c("out", 2.6e-6, 1e-5)])
    assert worst_used([passing, nonfinite]) == math.inf
    assert worst_used([passing, exact]) == math.inf
    assert worst_used([passing, raised]) is None  # no number measured: "-", never the passing 0.26
    assert worst_used([]) is None
