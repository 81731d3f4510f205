"""harness.gate.drift and its gate rows: the same cases run twice by the real `run` command, paired."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness import gate
from harness.cli import main
from harness.core.compare import Comparison
from harness.gate import drift, thresholds
from harness.store.read import load
from harness.store.records import CaseRecord
from tests import _drift_fakes

KERNEL = "tests._drift_fakes:KERNEL"


def _run(out: Path) -> None:
    # Every case drawn whole (--no-pool): the 6 cases then include the head_dim 64 the planted change touches.
    argv = ["run", "--kernel", KERNEL, "--oracle", "jax_reference", "--profile", "ci", "--examples", "6", "--no-pool"]
    assert main([*argv, "--no-database", "--out", str(out)]) == 0


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three stores of the same derandomized cases: two alike, one with the doubled output error."""
    root = tmp_path_factory.mktemp("drift")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(_drift_fakes.DOUBLE_ENV, raising=False)
        _run(root / "base")
        _run(root / "same")
        mp.setenv(_drift_fakes.DOUBLE_ENV, "1")
        _run(root / "doubled")
    return {name: root / name for name in ("base", "same", "doubled")}


def _kernel_pairs(a: Path, b: Path) -> list[drift.CaseDrift]:
    pairs = drift.pair(load([a]).cases, load([b]).cases)
    return [d for d in pairs if d.implementation == KERNEL]


def test_identical_environments_pair_bit_identical_and_pass(stores) -> None:
    pairs = _kernel_pairs(stores["base"], stores["same"])
    assert len(pairs) == 6 and all(d.identical for d in pairs)
    result = gate.compare(load([stores["base"]]), load([stores["same"]]), thresholds.load())
    assert not result.failed, gate.format_table(result)
    (row,) = [r for r in result.rows if r.category == "drift" and r.subject.startswith(KERNEL)]
    assert row.status == "unchanged" and row.candidate == "6 bit-identical"


def test_a_doubled_error_within_tolerance_fails_the_gate(stores) -> None:
    pairs = _kernel_pairs(stores["base"], stores["doubled"])
    moved = [d for d in pairs if not d.identical]
    # Some cases, not all: the planted change touches head_dim 64 only.
    assert 0 < len(moved) < len(pairs)
    for d in moved:
        assert d.case["head_dim"] == 64 and d.passed_before and d.passed_after  # within tolerance on both sides
        out = {q.quantity: q for q in d.quantities}["out"]
        assert out.growth == pytest.approx(2.0, rel=1e-3)
        assert [q.quantity for q in d.beyond(1.5, 0.001)] == ["out"]  # the gradients did not move
    th = thresholds.load()
    result = gate.compare(load([stores["base"]]), load([stores["doubled"]]), th)
    assert result.failed
    (row,) = result.failures
    assert row.category == "drift" and row.subject == f"{KERNEL} paired cases"
    assert f"{len(moved)} drifted" == row.change and "out err" in row.detail and "(x2.00)" in row.detail
    # Loosen the limit past a doubling and the same stores pass: the limit is what decides.
    loose = thresholds.Thresholds(drift_factor=2.5, limits=th.limits)
    assert not gate.compare(load([stores["base"]]), load([stores["doubled"]]), loose).failed


def test_gate_command_and_report_name_the_drift_with_a_replay(stores, tmp_path: Path, capsys) -> None:
    base, cand = load([stores["base"]]), load([stores["doubled"]])
    th = thresholds.load()
    pairs = drift.write_replays(
        drift.pair(base.cases, cand.cases),
        cand.cases,
        cand.runs,
        stores["doubled"],  # beside the candidate's records, where the gate finds them
        factor=th.drift_factor,
        min_used=th.drift_min_used,
    )
    written = [d for d in pairs if d.replay]
    # The drifts beyond the limit, and every move the report lists: the identical pairs have none.
    assert {d.case_id for d in written} == {d.case_id for d in drift.largest(pairs, drift.LISTED)}
    assert all(d.beyond(th.drift_factor, th.drift_min_used) for d in written)
    # The replay file is a failure file `repro` accepts; the case passes its tolerance, so it exits 0.
    doc = json.loads(Path(written[0].replay).read_text())
    assert doc["kernel"] == KERNEL and doc["failure"].startswith("numerics drift (beyond x1.5): out err")
    assert main(["repro", written[0].replay]) == 0
    assert "PASSES NOW" in capsys.readouterr().out

    code = main(
        [
            "gate",
            "--baseline",
            str(stores["base"]),
            "--candidate",
            str(stores["doubled"]),
            "--report",
            str(tmp_path / "r.html"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "drift        WORSE" in out and "GATE FAILED: 1 regression (drift 1)" in out
    html = (tmp_path / "r.html").read_text()
    assert 'id="drift"' in html and "x2.00" in html and "python -m harness repro" in html
    assert "replay: python -m harness repro" in out


def test_growth_edge_cases() -> None:
    q = lambda before, after: drift.QuantityDrift(  # noqa: E731
        quantity="out", before=before, after=after, bound_before=1.0, bound_after=1.0
    )
    assert q(0.0, 0.0).growth == 1.0 and math.isinf(q(0.0, 0.1).growth) and math.isnan(q(math.inf, 0.1).growth)
    assert q(0.0, 0.1).beyond(1.5, 0.001) and not q(0.0, 1e-5).beyond(1.5, 0.001)  # rounding dust
    assert not q(0.1, 0.14).beyond(1.5, 0.001) and q(0.1, 0.16).beyond(1.5, 0.001)


def test_drift_thresholds_are_validated() -> None:
    with pytest.raises(thresholds.ThresholdError, match="drift.factor=0.5 must be at least 1"):
        thresholds.Thresholds(drift_factor=0.5)
    assert thresholds.load().drift_factor == 1.5


def _rec(digest: str | None, err: float) -> CaseRecord:
    comp = Comparison(quantity="out", max_abs=err, max_rel=err, oracle_abs=0.0, ratio=1.0, bound=1e-3, passed=True)
    return CaseRecord(
        run_id="r", implementation="k", case_id="c", case={}, passed=True, digest=digest, comparisons=[comp]
    )


@pytest.mark.parametrize(
    ("base", "cand", "identical"),
    [
        # The same bits, against a truth each side recomputed with its own jax: identical.
        pytest.param(_rec("d1", 1e-6), _rec("d1", 1.1e-6), True, id="same-digest-other-error"),
        # Other bits that happen to give the same error figures: not identical.
        pytest.param(_rec("d1", 1e-6), _rec("d2", 1e-6), False, id="other-digest-same-error"),
        # Records written before digests: the error figures decide.
        pytest.param(_rec(None, 1e-6), _rec("d1", 1e-6), True, id="no-digest-same-error"),
        pytest.param(_rec(None, 1e-6), _rec(None, 2e-6), False, id="no-digest-other-error"),
    ],
)
def test_identical_means_the_same_returned_bits(base: CaseRecord, cand: CaseRecord, identical: bool) -> None:
    (d,) = drift.pair([base], [cand])
    assert d.identical is identical
