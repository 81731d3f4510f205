"""Leak detection: planted leaks are caught, the upstream kernel passes, the gate fails a leaking candidate."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness import gate
from harness.cli import main
from harness.core.contract import resolve
from harness.gate.thresholds import load
from harness.running import leak
from harness.store import read as records

OUTPUTS = "tests.planted.leak_outputs:flash_attention"
BACKWARD = "tests.planted.leak_backward:flash_attention"
# Few calls: live-array counts are exact, so 6 sampled calls already give slope 0 or >= 1.
CALLS = 6


@pytest.mark.parametrize(
    ("ys", "slope"),
    [
        pytest.param([5, 5, 5, 5], 0.0, id="flat"),
        pytest.param([1, 2, 3, 4, 5], 1.0, id="one-per-call"),
        pytest.param([0, 0, 0, 100, 0, 0, 0], 0.0, id="one-spike-ignored"),
        pytest.param([0, 0, 0, 0, 0, 0, 50], 0.0, id="one-late-step-ignored"),
        pytest.param([3], 0.0, id="one-point"),
    ],
)
def test_theil_sen_is_the_median_pairwise_slope(ys, slope):
    assert leak.theil_sen(ys) == pytest.approx(slope)


def test_judge_flags_only_series_past_their_limit():
    growth = {g.series: g for g in leak.judge({"live_arrays": [1, 2, 3, 4], "rss_bytes": [1e8, 1e8 + 4096, 1e8]})}
    assert growth["live_arrays"].grows and not growth["rss_bytes"].grows
    assert "live_arrays +1 arrays/call" in str(growth["live_arrays"])


@pytest.mark.parametrize(
    ("spec", "variant", "leaks"),
    [
        pytest.param(OUTPUTS, "fwd-run", True, id="keeps-outputs"),
        pytest.param(BACKWARD, "fwd_bwd-run", True, id="keeps-gradients"),
        pytest.param(BACKWARD, "fwd-run", False, id="backward-leak-unseen-forward-only"),
        pytest.param("pallas_flash", "fwd_bwd-run", False, id="upstream"),
    ],
)
def test_planted_leaks_are_caught_and_the_upstream_kernel_passes(spec, variant, leaks):
    (v,) = [v for v in leak.VARIANTS if v.name == variant]
    result = leak.measure(resolve(spec), v, calls=CALLS)
    assert result.error is None
    assert result.passed is not leaks, [str(g) for g in result.growth]
    if leaks:
        assert {g.series for g in result.growing} >= {"live_arrays", "live_bytes"}


def test_the_leak_command_records_and_the_gate_fails_a_leaking_candidate(tmp_path, capsys):
    base, cand = tmp_path / "base", tmp_path / "cand"
    argv = ["leak", "--calls", str(CALLS), "--variant", "fwd-run"]
    assert main([*argv, "--kernel", "pallas_flash", "--out", str(base)]) == 0
    assert main([*argv, "--kernel", f"pallas_flash={OUTPUTS}", "--out", str(cand)]) == 1
    out = capsys.readouterr().out
    assert f"LEAK pallas_flash={OUTPUTS} fwd-run: live_arrays +1 arrays/call" in out
    (rec,) = [json.loads(p.read_text()) for p in cand.glob("records/*/leak--*.json")]
    assert rec["kind"] == "leak" and rec["leak_schema"] == leak.LEAK_SCHEMA and not rec["passed"]
    assert len(rec["samples"]["live_arrays"]) == CALLS
    # The gate compares by implementation name: rename the candidate's records as an upgrade would be.
    b, c = records.load([base]), records.load([cand])
    c.leaks = [dataclasses.replace(r, implementation="pallas_flash") for r in c.leaks]
    result = gate.compare(b, c, load(None))
    (row,) = [r for r in result.rows if r.category == "leak"]
    assert row.fails and row.status == "worse" and "live_arrays" in row.detail
    assert main(["report", "--store", str(cand), "--out", str(tmp_path / "index.html")]) == 1
    html = (tmp_path / "index.html").read_text()
    assert 'id="leaks"' in html and "LEAKS" in html and "<polyline" in html


@pytest.mark.slow
def test_the_upstream_kernel_passes_20_of_20_leak_checks():
    kernel = resolve("pallas_flash")
    failures = [
        (i, v.name, [str(g) for g in r.growing], r.error)
        for i in range(20)
        for v in leak.VARIANTS
        if not (r := leak.measure(kernel, v)).passed
    ]
    assert failures == []
