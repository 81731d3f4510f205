"""harness.gate and `python -m harness gate`: new failures, speed beyond noise, memory limits, thresholds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness import gate
from harness.cli import main
from harness.gate import drift, thresholds
from harness.gate.stats import mann_whitney_u
from harness.gate.thresholds import Limit, ThresholdError
from harness.store.read import load
from harness.store.records import LeakRecord
from tests import record_builders as rb

BASE, CAND = "20261129T100000Z-ci-aaaaaa", "20261129T110000Z-ci-bbbbbb"
UPGRADE = {"jax": "0.11.0", "jaxlib": "0.11.0"}
PROCESSES = 8  # bench processes a side: enough for the speed rule over a few timings (upgrade.BENCH_ROUNDS)


def _gate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["gate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A passing baseline, and a candidate with one new failure, one speed regression and one memory growth."""
    base = rb.write_store(tmp_path / "base", rb.environment(BASE, bench_processes=PROCESSES))
    recs = rb.environment(CAND, versions=UPGRADE, fail_seed=3, bench_processes=PROCESSES)
    for r in recs:
        if r["kind"] == "bench" and r["pass"] == "fwd":
            r["samples"] = rb.timings(0.013, 3)  # 1.3x slower than the baseline's 10 ms, in every process
        if r["kind"] == "compile" and r["topology"] == "v5e:1x1" and r["pass"] == "fwd_bwd":
            r["memory"]["temp"] = int(rb.MEMORY["temp"] * 1.20)
    return base, rb.write_store(tmp_path / "cand", recs)


def test_planted_regressions_fail_the_gate_and_are_named(capsys, planted) -> None:
    base, cand = planted
    code, out, _ = _gate(capsys, "--baseline", str(base), "--candidate", str(cand))
    assert code == 1
    worse = [line for line in out.splitlines() if " WORSE " in line]
    assert len(worse) == 3, out
    assert any(line.startswith("correctness") and "pallas_flash" in line for line in worse)
    assert any(line.startswith("speed") and "fwd mha_f32_256 on tpu_interpret" in line for line in worse)
    assert any(line.startswith("memory") and "fwd_bwd mha_f32_256 on v5e:1x1 temp_bytes" in line for line in worse)
    assert "temp_bytes grew +20.00% (2.00 MiB -> 2.40 MiB), limit 5%" in out
    assert "python -m harness repro" in out and "seed=3" in out
    assert "GATE FAILED: 3 regressions (correctness 1, memory 1, speed 1)" in out


def test_two_identical_runs_pass(capsys, tmp_path: Path) -> None:
    base = rb.write_store(tmp_path / "base", rb.environment(BASE))
    cand = rb.write_store(tmp_path / "cand", rb.environment(CAND))
    code, out, _ = _gate(capsys, "--baseline", str(base), "--candidate", str(cand))
    assert code == 0, out
    assert "GATE PASSED" in out and "WORSE" not in out


def test_selectors_within_one_store(capsys, tmp_path: Path) -> None:
    store = rb.write_store(tmp_path / "s", rb.environment(BASE) + rb.environment(CAND, versions=UPGRADE, fail_seed=1))
    code, out, _ = _gate(capsys, "--store", str(store), "--baseline", "jax=0.10", "--candidate", "jax=0.11.0")
    assert code == 1 and "+1 new failing" in out
    code, out, _ = _gate(capsys, "--store", str(store), "--baseline", BASE[:20], "--candidate", BASE)
    assert code == 0, out


def _th(**kw) -> thresholds.Thresholds:
    return thresholds.Thresholds(**{"limits": (Limit.parse("temp_bytes:5%"),), **kw})


def _records(*recs: dict) -> object:
    from harness.store.read import Records

    out = Records()
    for r in recs:
        out.add(r, "test")
    return out


def test_a_single_sample_is_never_judged() -> None:
    b = _records(rb.bench_record(BASE, [0.010]))
    c = _records(rb.bench_record(CAND, [0.050]))  # five times slower, but one sample each
    (row,) = gate.speed_rows(b, c, _th())
    assert row.status == "insufficient" and not row.fails
    assert "insufficient samples: baseline 1, candidate 1" in row.detail
    (row,) = gate.speed_rows(b, c, _th(fail_on_insufficient=True))
    assert row.fails


def _processes(run_id: str, median: float, n: int = PROCESSES, *, seed: int = 0, **kw: object) -> list[dict]:
    """A benchmark timed in `n` processes (3 calls each), as upgrade's bench rounds record it."""
    # Each process a little slower than the one before, so that no two medians tie.
    return [
        rb.bench_record(f"{run_id}-{i}", [x * (1 + 0.001 * i) for x in rb.timings(median, 3, seed=seed + i)], **kw)
        for i in range(n)
    ]


def test_noise_and_small_moves_are_unchanged_real_speedups_better() -> None:
    b = _records(*_processes(BASE, 0.010))
    noisy = _records(*_processes(CAND, 0.010, seed=5))
    assert [r.status for r in gate.speed_rows(b, noisy, _th())] == ["unchanged"]
    slight = _records(*_processes(CAND, 0.0105))  # beyond noise, within the 1.10 factor
    (row,) = gate.speed_rows(b, slight, _th())
    assert row.status == "unchanged" and "within factor 1.1" in row.detail
    fast = _records(*_processes(CAND, 0.007))
    assert [r.status for r in gate.speed_rows(b, fast, _th())] == ["better"]


def test_repetitions_in_one_process_are_not_independent_samples() -> None:
    # Ten calls a side in one process each, five times slower: still one sample a side, never judged.
    b = _records(rb.bench_record(BASE, rb.timings(0.010, 10)))
    c = _records(rb.bench_record(CAND, rb.timings(0.050, 10)))
    (row,) = gate.speed_rows(b, c, _th())
    assert row.status == "insufficient" and "baseline 1, candidate 1" in row.detail
    assert (row.baseline, row.candidate) == ("10 ms (n=1 processes)", "50 ms (n=1 processes)")


def test_the_timings_of_one_gate_are_judged_as_one_family() -> None:
    # Five processes a side fully apart: p = 0.0079 < 0.01 for one timing alone, but not over three (Holm).
    one = [(s, "mha_f32_256") for s in ("fwd",)]
    three = [(p, s) for p in ("fwd", "fwd_bwd") for s in ("mha_f32_256", "causal_bf16_512")][:3]
    for benches, status in ((one, "worse"), (three, "insufficient")):
        b = _records(*(r for p, s in benches for r in _processes(BASE, 0.010, 5, pass_=p, shape=s)))
        c = _records(*(r for p, s in benches for r in _processes(CAND, 0.020, 5, pass_=p, shape=s)))
        rows = gate.speed_rows(b, c, _th())
        assert [r.status for r in rows] == [status] * len(benches), [r.detail for r in rows]
    assert "enough for p < 0.01 over the 3 judged together (Holm)" in rows[0].detail
    # Eight a side reach it over three: 2/12870 * 3 < 0.01.
    b = _records(*(r for p, s in three for r in _processes(BASE, 0.010, 8, pass_=p, shape=s)))
    c = _records(*(r for p, s in three for r in _processes(CAND, 0.020, 8, pass_=p, shape=s)))
    rows = gate.speed_rows(b, c, _th())
    assert [r.status for r in rows] == ["worse"] * 3 and "Holm-adjusted over 3: p=0.00047" in rows[0].detail


def test_timings_from_different_backends_are_never_compared() -> None:
    b = _records(rb.bench_record(BASE, rb.timings(0.010), backend="tpu_interpret"))
    c = _records(rb.bench_record(CAND, rb.timings(9.0), backend="tpu"))
    (row,) = gate.speed_rows(b, c, _th())
    assert row.status == "incomparable" and not row.fails
    assert (row.baseline, row.candidate) == ("tpu_interpret (cpu:0)", "tpu (tpu:0 (TPU v5 lite))")


def test_compile_failures_and_missing_checks() -> None:
    b = _records(rb.compile_record(BASE), rb.compile_record(BASE, topology="v4:1x1x1"))
    c = _records(rb.compile_record(CAND, ok=False, error="Mosaic failed to compile TPU kernel: <vmem overflow>"))
    rows = {r.subject: r for r in gate.compile_rows(b, c, _th())}
    new = rows["pallas_flash fwd mha_f32_256 on v5e:1x1"]
    assert new.status == "worse" and new.fails and "new compile failure: Mosaic failed" in new.detail
    assert new.detail.endswith(
        "repro: python -m harness compile --kernel pallas_flash --topology v5e:1x1 --shape mha_f32_256 --pass fwd"
    )
    gone = rows["pallas_flash fwd mha_f32_256 on v4:1x1x1"]
    assert gone.status == "missing" and gone.fails
    assert not [r for r in gate.compile_rows(b, c, _th(fail_on_missing=False)) if r.status == "missing"][0].fails


def test_a_fixed_failure_is_better(tmp_path: Path) -> None:
    b = load([rb.write_store(tmp_path / "b", rb.environment(BASE, fail_seed=2))])
    c = load([rb.write_store(tmp_path / "c", rb.environment(CAND))])
    result = gate.compare(b, c, _th())
    assert not result.failed
    assert [r.status for r in result.rows if r.subject == "pallas_flash"] == ["better"]


def test_memory_shrinking_is_better_and_growth_within_limit_unchanged() -> None:
    b = _records(rb.compile_record(BASE))
    temp = rb.MEMORY["temp"]
    for new_temp, status in ((int(temp * 0.5), "better"), (int(temp * 1.04), "unchanged"), (int(temp * 1.06), "worse")):
        c = _records(rb.compile_record(CAND, memory={"temp": new_temp}))
        assert [r.status for r in gate.compile_rows(b, c, _th())] == [status]


@pytest.mark.parametrize(
    ("text", "field", "amount", "percent"),
    [
        ("temp_bytes:5%", "temp_bytes", 5.0, True),
        ("argument_bytes:0%", "argument_bytes", 0.0, True),
        ("temp_bytes:1MiB", "temp_bytes", 2.0**20, False),
        ("generated_code_bytes: 4096", "generated_code_bytes", 4096.0, False),
        ("flops:2.5%", "flops", 2.5, True),
    ],
)
def test_limit_parse(text: str, field: str, amount: float, percent: bool) -> None:
    lim = Limit.parse(text)
    assert (lim.field, lim.amount, lim.percent) == (field, amount, percent)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        pytest.param("temp_bytes", "expected FIELD:N% or FIELD:N", id="no-value"),
        pytest.param("temp:5%", "unknown field 'temp'; fields: temp_bytes", id="unknown-field"),
        pytest.param("temp_bytes:five", "'five' is not a number", id="not-a-number"),
        pytest.param("temp_bytes:-5%", "is not a number", id="negative"),
    ],
)
def test_limit_parse_errors(text: str, match: str) -> None:
    with pytest.raises(ThresholdError, match=match):
        Limit.parse(text)


def test_limit_message_names_field_value_and_limit() -> None:
    out = Limit.parse("temp_bytes:5%").check(1_000_000, 1_100_000)
    assert out.status == "worse"
    assert out.message == "temp_bytes grew +10.00% (976.56 KiB -> 1.05 MiB), limit 5%"
    out = Limit.parse("temp_bytes:64KiB").check(2**20, 2**20 + 2**17)
    assert out.message == "temp_bytes grew +12.50% (1.00 MiB -> 1.12 MiB), limit 64.00 KiB"


def test_thresholds_file_overrides_defaults(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_text('[speed]\nfactor = 1.5\n[memory]\nlimits = ["temp_bytes:50%"]\n')
    th = thresholds.load(f, limits=["output_bytes:1%"])
    assert th.factor == 1.5 and th.alpha == 0.01 and th.min_samples == 5
    assert sorted(lim.text for lim in th.limits) == ["output_bytes:1%", "temp_bytes:50%"]
    defaults = thresholds.load()
    assert {lim.text for lim in defaults.limits} >= {"temp_bytes:5%"}


@pytest.mark.parametrize(
    ("content", "match"),
    [
        pytest.param("[speed\n", "not valid TOML", id="bad-toml"),
        pytest.param("[sped]\nalpha = 0.1\n", "unknown sections", id="unknown-section"),
        pytest.param("[speed]\nalfa = 0.1\n", "unknown keys", id="unknown-key"),
        pytest.param("[speed]\nalpha = 2.0\n", "speed.alpha=2.0 must be between 0 and 1", id="alpha"),
        pytest.param("[speed]\nmin_samples = 1\n", "never judge one sample", id="one-sample"),
        pytest.param('[speed]\nfactor = "big"\n', "must be a float", id="type"),
    ],
)
def test_bad_thresholds_files(tmp_path: Path, content: str, match: str) -> None:
    f = tmp_path / "t.toml"
    f.write_text(content)
    with pytest.raises(ThresholdError, match=match):
        thresholds.load(f)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        pytest.param(["--baseline", "/nonexistent"], "required: --candidate", id="missing-candidate"),
        pytest.param(["--baseline", "nosuchrun", "--candidate", "{cand}"], "not a directory", id="unknown-run"),
        pytest.param(["--baseline", "jax=9.9", "--candidate", "{cand}"], "no run matches 'jax=9.9'", id="no-match"),
        pytest.param(["--baseline", "jax", "--candidate", "{cand}"], "is not a directory, a KEY=VALUE", id="bare"),
        pytest.param(
            ["--baseline", "{cand}", "--candidate", "{cand}", "--limit", "temp:5%"], "unknown field", id="bad-limit"
        ),
        pytest.param(["--baseline", "{cand}", "--candidate", "{tmp}"], "neither a store", id="not-a-store"),
    ],
)
def test_bad_usage_exits_2_with_one_line(capsys, tmp_path: Path, argv: list[str], match: str) -> None:
    cand = rb.write_store(tmp_path / "cand", rb.environment(CAND))
    argv = [a.format(cand=cand, tmp=tmp_path) for a in argv]
    code, out, err = _gate(capsys, "--store", str(cand), *argv)
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1 and match in err, err
    assert "Traceback" not in err


def test_nothing_to_compare_is_bad_input(capsys, tmp_path: Path) -> None:
    empty = rb.write_store(tmp_path / "s", [rb.run_record(BASE, status="running")])
    code, _, err = _gate(capsys, "--store", str(empty), "--baseline", BASE, "--candidate", BASE)
    assert code == 2 and err.strip().endswith(f"(baseline run {BASE}, candidate run {BASE})")
    assert "NOTHING COMPARED: neither side has case, bench or compile records" in err


@pytest.mark.no_mutation
def test_gate_writes_the_same_comparison_into_the_report(capsys, planted, tmp_path: Path) -> None:
    base, cand = planted
    out_html = tmp_path / "r.html"
    code, out, _ = _gate(capsys, "--baseline", str(base), "--candidate", str(cand), "--report", str(out_html))
    assert code == 1
    html = out_html.read_text()
    assert "GATE FAILED: 3 regressions (correctness 1, memory 1, speed 1)" in html
    assert "temp_bytes grew +20.00% (2.00 MiB -&gt; 2.40 MiB), limit 5%" in html


# --- stores written by the real run, compile and bench commands ---


@pytest.fixture(scope="session")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rb.real_store(tmp_path_factory)


def _edit(store: Path, kind: str, change) -> None:  # noqa: ANN001 - change(record) edits it in place
    """Apply `change` to every record of `kind` in `store`, rewriting the files the writers wrote."""
    for path in (store / "records").glob("*/*.json"):
        rec = json.loads(path.read_text())
        if rec["kind"] == kind:
            change(rec)
            path.write_text(json.dumps(rec))


@pytest.mark.no_mutation
def test_a_store_from_the_real_writers_against_itself_passes(capsys, real_store: Path) -> None:
    code, out, _ = _gate(capsys, "--baseline", str(real_store), "--candidate", str(real_store))
    assert code == 0 and "GATE PASSED" in out, out
    # BROKEN fails in both: an old failure is not a regression.
    rows = {r.subject: r for r in gate.compare(load([real_store]), load([real_store]), thresholds.load()).rows}
    assert rows["tests._fakes:BROKEN"].status == "unchanged"
    assert "failing in both" in rows["tests._fakes:BROKEN"].change


@pytest.mark.no_mutation
def test_real_records_with_planted_regressions_fail_the_gate(capsys, tmp_path: Path, real_store: Path) -> None:
    broken = "tests._fakes:BROKEN"
    # The baseline never ran BROKEN, so its failures are new in the candidate.
    base = rb.copy_store(real_store, tmp_path / "base", drop=lambda r: r.get("implementation") == broken)
    cand = rb.copy_store(real_store, tmp_path / "cand")
    for store in (base, cand):  # the benchmark timed in enough processes for the speed rule
        rb.repeat_bench_runs(store, PROCESSES)
    # A slowdown beyond the samples' own spread: under load one sample can be several times another, so
    # scaling by a constant can leave the two sets overlapping (honest noise); adding three times the
    # slowest baseline sample puts every candidate sample above every baseline one, at least 4x the median.
    _edit(cand, "bench", lambda r: r.update(samples=[s + 3 * max(r["samples"]) for s in r["samples"]]))
    _edit(cand, "compile", lambda r: r["memory"].update(argument=r["memory"]["argument"] + 1))  # limit 0%
    code, out, _ = _gate(capsys, "--baseline", str(base), "--candidate", str(cand))
    assert code == 1, out
    worse = [line for line in out.splitlines() if " WORSE " in line]
    assert any(line.startswith("correctness") and broken in line for line in worse), out
    assert any(line.startswith("speed") and "jax_xla fwd mha_f32_256" in line for line in worse), out
    assert any(line.startswith("memory") and "argument_bytes" in line for line in worse), out
    assert "GATE FAILED: 3 regressions (correctness 1, memory 1, speed 1)" in out


# --- the verdict rows, one decision at a time (what `nox -s mutation` holds the gate to) ---

SEP_LOW, SEP_HIGH = [0.9, 0.95, 1.0, 1.01, 1.02], [1.03, 1.05, 1.1, 1.2, 1.3]  # medians 1.0 and 1.1, apart


@pytest.mark.parametrize(
    ("b", "c", "th", "status", "ratio"),
    [
        pytest.param([], [1.0] * 5, {}, "insufficient", math.nan, id="no-baseline-samples"),
        pytest.param([1.0] * 5, [], {}, "insufficient", math.nan, id="no-candidate-samples"),
        # A zero baseline median gives no ratio (never a division by zero), so no factor is beyond it.
        pytest.param([0.0] * 5, [1.0] * 5, {}, "unchanged", math.nan, id="zero-baseline"),
        pytest.param(SEP_LOW, [x * 2 for x in SEP_LOW], {}, "worse", 2.0, id="min-samples-exactly"),
        # Eight each could reject (min p 2/12870), but fewer than min_samples is never judged.
        pytest.param(
            SEP_LOW[:4] * 2, SEP_HIGH[:4] * 2, {"min_samples": 10}, "insufficient", 1.075 / 0.975, id="below-min"
        ),
        # Three against three: the smallest p any data can give is 0.1, which is not below alpha 0.1.
        pytest.param([1, 2, 3], [4, 5, 6], {"alpha": 0.1, "min_samples": 3}, "insufficient", 2.5, id="min-p-at-alpha"),
        # One swap in four against four: p = 4/70 exactly; at alpha = 4/70 that is not significant.
        pytest.param(
            [1, 2, 3, 5], [4, 6, 7, 8], {"alpha": 4 / 70, "min_samples": 4}, "unchanged", 2.6, id="p-at-alpha"
        ),
        pytest.param(
            [4, 6, 7, 8],
            [1, 2, 3, 5],
            {"alpha": 4 / 70, "min_samples": 4},
            "unchanged",
            2.5 / 6.5,
            id="p-at-alpha-faster",
        ),
        pytest.param(SEP_LOW, SEP_HIGH, {}, "unchanged", 1.1, id="ratio-at-factor"),  # 1.1 is not beyond 1.10
        pytest.param(SEP_HIGH, SEP_LOW, {}, "unchanged", 1 / 1.1, id="ratio-at-inverse-factor"),
        pytest.param(SEP_HIGH, SEP_LOW + [0.5], {}, "better", 0.975 / 1.1, id="faster"),
    ],
)
def test_compare_samples_at_each_limit(b: list[float], c: list[float], th: dict, status: str, ratio: float) -> None:
    got = gate.compare_samples(b, c, thresholds.Thresholds(**th))
    assert got.status == status
    assert got.ratio == pytest.approx(ratio, nan_ok=True)
    if status == "insufficient":
        assert got.p is None
    else:  # the p-value the verdict rests on, as the row prints it
        assert got.p == mann_whitney_u(b, c).p


def _row(status: str, *, fails: bool = False, category: str = "speed") -> gate.Row:
    return gate.Row(
        category=category, subject="s", status=gate.Status(status), baseline="", candidate="", change="", fails=fails
    )


def test_the_summary_line_counts_rows_by_status_and_failures_by_category() -> None:
    result = lambda rows: gate.GateResult(baseline="b", candidate="c", thresholds="t", rows=rows)  # noqa: E731
    assert result([]).summary() == "NOTHING COMPARED: neither side has case, bench or compile records"
    rows = [_row("better"), _row("unchanged"), _row("unchanged"), _row("new")]
    assert result(rows).count("unchanged") == 2
    # Not a regression: each group counted (harness.gate.Group), "unchanged" as within noise.
    assert result(rows).summary() == "GATE PASSED: no regression (1 improvement, 1 new, 0 not compared, 2 within noise)"
    rows += [_row("worse", fails=True), _row("missing", fails=True, category="compile")]
    assert result(rows).summary() == "GATE FAILED: 2 regressions (compile 1, speed 1)"
    assert result(rows[:5]).summary() == "GATE FAILED: 1 regression (speed 1)"
    rows.append(_row("insufficient", fails=True))
    assert result(rows).summary() == "GATE FAILED: 3 regressions (compile 1, speed 2)"


def test_a_new_failure_row_shows_the_shrunk_failure_with_a_repro_file(tmp_path: Path) -> None:
    # Four new failures: the row's example is the smallest shrunk one with a repro file, though it
    # is not the first, not the only shrunk one, and not the smallest failure.
    repro = tmp_path / "failures" / "f.json"
    sizes = {1: 8, 2: 16, 3: 64, 4: 32, 5: 128}
    recs = [
        rb.case_record(CAND, rb.case(1, q_len=8), fail_quantity="out"),
        rb.case_record(CAND, rb.case(2, q_len=16), fail_quantity="out", shrunk=True),
        rb.case_record(CAND, rb.case(3, q_len=64), fail_quantity="out", shrunk=True, failure_file=str(repro)),
        rb.case_record(CAND, rb.case(4, q_len=32), fail_quantity="out", shrunk=True, failure_file=str(repro)),
        rb.case_record(CAND, rb.case(5, q_len=128)),  # fixed: failing in the baseline only
    ]
    base = [
        rb.case_record(BASE, rb.case(s, q_len=q), fail_quantity="out" if s == 5 else None) for s, q in sizes.items()
    ]
    (row,) = gate.correctness_rows(_records(*base), _records(*recs), _th())
    assert (row.status, row.fails) == ("worse", True)
    assert (row.baseline, row.candidate, row.change) == ("5 cases, 1 failing", "5 cases, 4 failing", "+4 new failing")
    assert f"new failure: {rb.case(4, q_len=32)}:" in row.detail
    assert row.detail.endswith(f"; repro: python -m harness repro {repro}")
    (row,) = gate.correctness_rows(_records(), _records(*recs), _th())  # never run by the baseline: new failures
    assert (row.status, row.baseline) == ("worse", "not run")


def test_a_new_failure_row_lists_every_distinct_failure_with_its_repro_file(tmp_path: Path) -> None:
    # A run that found two distinct failures wrote a failure file for each: the row names both.
    files = [tmp_path / "failures" / f"{n}.json" for n in ("a", "b")]
    recs = [
        rb.case_record(CAND, rb.case(1, q_len=8), fail_quantity="out"),
        rb.case_record(CAND, rb.case(2, q_len=16), fail_quantity="out", shrunk=True, failure_file=str(files[0])),
        rb.case_record(CAND, rb.case(3, q_len=64), fail_quantity="dq", shrunk=True, failure_file=str(files[1])),
    ]
    (row,) = gate.correctness_rows(_records(), _records(*recs), _th())
    assert row.change == "+3 new failing (2 distinct failures)" and row.fails
    assert row.detail.startswith(f"new failures: {rb.case(2, q_len=16)}:")
    for path in files:
        assert f"repro: python -m harness repro {path}" in row.detail


def test_a_compile_figure_missing_on_a_side_is_not_compared() -> None:
    b = _records(rb.compile_record(BASE))
    c = _records(rb.compile_record(CAND))
    c.compiles[0].memory.pop("temp")
    fields = {
        r.subject.rsplit(" ", 1)[-1]
        for r in gate.compile_rows(b, c, _th(limits=tuple(map(Limit.parse, ("temp_bytes:5%", "output_bytes:5%")))))
    }
    assert fields == {"output_bytes"}


def test_correctness_rows_for_each_movement() -> None:
    fails = {("base", "fixed"), ("base", "both"), ("cand", "both")}
    recs = {side: [] for side in ("base", "cand")}
    for impl, sides in (("both", "base cand"), ("gone", "base"), ("added", "cand"), ("fixed", "base cand")):
        for side in sides.split():
            for s in (1, 2):  # two cases; the second fails where `fails` says
                fail = "out" if s == 2 and (side, impl) in fails else None
                recs[side].append(rb.case_record(side, rb.case(s), implementation=impl, fail_quantity=fail))
    rows = {r.subject: r for r in gate.correctness_rows(_records(*recs["base"]), _records(*recs["cand"]), _th())}
    got = {k: (r.status, r.fails, r.baseline, r.candidate, r.change) for k, r in rows.items()}
    assert got == {
        "added": ("new", False, "not run", "2 cases, 0 failing", "not run by the baseline"),
        "both": ("unchanged", False, "2 cases, 1 failing", "2 cases, 1 failing", "no new failure; 1 failing in both"),
        "fixed": ("better", False, "2 cases, 1 failing", "2 cases, 0 failing", "1 fixed"),
        "gone": ("missing", True, "2 cases, 0 failing", "not run", "not run by the candidate"),
    }
    th = _th(fail_on_missing=False)
    assert not {r.subject: r for r in gate.correctness_rows(_records(*recs["base"]), _records(), th)}["gone"].fails


def _pair(impl: str, seed: int, before: float, after: float, *, identical: bool = False, replay: str | None = None):  # noqa: ANN202
    q = drift.QuantityDrift(quantity="out", before=before, after=after, bound_before=1e-3, bound_after=1e-3)
    return drift.CaseDrift(
        implementation=impl,
        case_id=f"c{seed}",
        case=rb.case(seed).to_json(),
        identical=identical,
        passed_before=True,
        passed_after=True,
        quantities=(q,),
        replay=replay,
    )


def test_drift_rows_name_the_worst_pair_beyond_the_factor() -> None:
    pairs = [
        _pair("calm", 1, 1e-4, 1.2e-4),
        _pair("calm", 2, 1e-4, 1.45e-4, identical=True),  # the same bits: its truth moved, not the kernel
        _pair("calm", 3, 1e-4, math.nan),  # no growth to speak of
        _pair("drifted", 4, 1e-4, 3e-4, replay="/s/drift/a.json"),
        _pair("drifted", 5, 1e-4, 5e-4, replay="/s/drift/b.json"),
        _pair("drifted", 6, 1e-4, 1e-4),
    ]
    calm, drifted = gate.drift_rows(pairs, _th())
    assert (calm.subject, calm.status, calm.fails, calm.category) == ("calm paired cases", "unchanged", False, "drift")
    assert (calm.baseline, calm.candidate, calm.change) == ("3 cases", "1 bit-identical", "2 moved, within limit")
    assert calm.detail == "largest error growth x1.20; limit x1.5"
    assert (drifted.status, drifted.fails, drifted.change) == ("worse", True, "2 drifted")
    assert drifted.detail.startswith(f"2 cases beyond x1.5 (even where both sides pass); worst {rb.case(5)}: out err")
    assert drifted.detail.endswith("; replay: python -m harness repro /s/drift/b.json")
    (still,) = gate.drift_rows([_pair("x", 1, 1e-4, 1e-4, identical=True)], _th())
    assert (still.status, still.detail) == ("unchanged", "no error moved; limit x1.5")


def test_compile_rows_for_each_movement() -> None:
    boom = "Mosaic failed: boom"
    b = _records(
        rb.compile_record(BASE, topology="v4:1x1x1", ok=False, error="old"),  # fixed
        rb.compile_record(BASE, topology="v5p:1x1x1", ok=False, error="old"),  # fails in both
        rb.compile_record(BASE, topology="v6e:1x1"),  # new failure, beside a passing record
    )
    c = _records(
        rb.compile_record(CAND, topology="v4:1x1x1"),
        rb.compile_record(CAND, topology="v5p:1x1x1", ok=False, error="old"),
        rb.compile_record(CAND, topology="v6e:1x1"),
        rb.compile_record(CAND, topology="v6e:1x1", ok=False, error=boom),
        rb.compile_record(CAND, topology="v5e:1x1", ok=False, error=boom),  # a new check, failing
        rb.compile_record(CAND, topology="v5e:2x2"),  # a new check, passing
    )
    rows = {r.subject.split(" on ")[1]: r for r in gate.compile_rows(b, c, _th())}
    got = {k: (r.category, r.status, r.fails, r.baseline, r.candidate, r.change) for k, r in rows.items()}
    assert got == {
        "v4:1x1x1": ("compile", "better", False, "fails", "compiles", "fixed"),
        "v5p:1x1x1": ("compile", "unchanged", False, "fails", "fails", "fails in both"),
        "v6e:1x1": ("compile", "worse", True, "compiles", "fails", "new failure"),
        "v5e:1x1": ("compile", "worse", True, "not run", "fails", "new failure"),
        "v5e:2x2": ("compile", "new", False, "not run", "compiles", "not compiled by the baseline"),
    }
    assert rows["v6e:1x1"].detail.startswith(f"new compile failure: {boom}")


def test_memory_rows_judge_the_median_of_each_side() -> None:
    temp = rb.MEMORY["temp"]
    b = _records(*(rb.compile_record(BASE, memory={"temp": t}) for t in (temp, 3 * temp, 2 * temp)))
    c = _records(rb.compile_record(CAND, memory={"temp": int(2.2 * temp)}))
    (row,) = gate.compile_rows(b, c, _th())
    assert (row.category, row.subject) == ("memory", "pallas_flash fwd mha_f32_256 on v5e:1x1 temp_bytes")
    assert (row.status, row.fails, row.baseline, row.candidate) == ("worse", True, "4.00 MiB", "4.40 MiB")


def test_speed_rows_for_each_movement() -> None:
    TI = "tpu_interpret (cpu:0)"  # noqa: N806 - where the records were timed
    b = _records(
        *_processes(BASE, 0.010),
        *_processes(BASE, 0.010, seed=1, pass_="fwd_bwd"),
        rb.bench_record(BASE, rb.timings(0.010), shape="gone"),
    )
    c = _records(
        *_processes(CAND, 0.020),
        *_processes(CAND, 0.020, backend="tpu"),  # timed on a backend the baseline has not: not compared
        *_processes(CAND, 0.020, seed=2, pass_="fwd_bwd"),
        rb.bench_record(CAND, rb.timings(0.010), shape="added"),
    )
    rows = gate.speed_rows(b, c, _th())
    got = [(r.subject, r.status, r.fails, r.baseline, r.candidate) for r in rows]
    assert got == [
        ("pallas_flash fwd added", "new", False, "not run", f"{TI}"),
        ("pallas_flash fwd gone", "missing", True, f"{TI}", "not run"),
        (f"pallas_flash fwd mha_f32_256 on {TI}", "worse", True, "10 ms (n=8 processes)", "20 ms (n=8 processes)"),
        (f"pallas_flash fwd_bwd mha_f32_256 on {TI}", "worse", True, "10 ms (n=8 processes)", "20 ms (n=8 processes)"),
    ]
    assert all(r.category == "speed" for r in rows)
    assert not [r for r in gate.speed_rows(b, c, _th(fail_on_missing=False)) if r.status == "missing"][0].fails


def _leak(run_id: str, impl: str, *, passed: bool = True) -> dict:
    growing = [] if passed else ["rss grows 1.0 MiB per call"]
    return LeakRecord(run_id=run_id, implementation=impl, variant="fwd-run", passed=passed, growing=growing).to_json()


def test_leak_rows_judge_the_candidate_and_name_the_repro() -> None:
    b = _records(_leak(BASE, "fixed", passed=False), _leak(BASE, "flat"), _leak(BASE, "grew"), _leak(BASE, "gone"))
    c = _records(_leak(CAND, "fixed"), _leak(CAND, "flat"), _leak(CAND, "grew", passed=False), _leak(CAND, "added"))
    rows = {r.subject: r for r in gate.leak_rows(b, c)}
    got = {k: (r.category, r.status, r.fails, r.baseline, r.candidate) for k, r in rows.items()}
    assert got == {
        "added fwd-run": ("leak", "new", False, "not run", "flat"),
        "fixed fwd-run": ("leak", "better", False, "leaks", "flat"),
        "flat fwd-run": ("leak", "unchanged", False, "flat", "flat"),
        "grew fwd-run": ("leak", "worse", True, "flat", "leaks"),
    }
    assert rows["grew fwd-run"].detail == (
        "memory grows with calls: rss grows 1.0 MiB per call; repro: python -m harness leak --kernel grew"
    )


def test_the_result_lists_the_twenty_largest_drifts() -> None:
    pairs = [_pair("k", s, 1e-4, 1e-4 * (1 + s / 100)) for s in range(1, 23)]
    result = gate.GateResult(baseline="b", candidate="c", thresholds="t", rows=[], drift=pairs)
    assert [d.case_id for d in result.largest_drifts()] == [f"c{s}" for s in range(22, 2, -1)]
    assert [d.case_id for d in result.largest_drifts(2)] == ["c22", "c21"]


def test_compare_lists_failures_first_and_keeps_every_pair() -> None:
    base = [rb.case_record(BASE, rb.case(s), implementation=impl) for impl in ("a", "gone") for s in (1, 2)]
    cand = [rb.case_record(CAND, rb.case(1), implementation="a")]
    cand.append(rb.case_record(CAND, rb.case(2), implementation="a", fail_quantity="out"))
    b, c = (
        _records(*base, rb.bench_record(BASE, rb.timings(0.01))),
        _records(*cand, rb.bench_record(CAND, rb.timings(0.01))),
    )
    result = gate.compare(b, c, _th(source="t.toml"), labels=("jax 0.9", "jax 0.10"))
    got = [(r.category, r.subject, r.status, r.fails) for r in result.rows]
    assert got == [
        ("correctness", "a", "worse", True),
        ("correctness", "gone", "missing", True),
        ("speed", "pallas_flash fwd mha_f32_256 on tpu_interpret (cpu:0)", "insufficient", False),
        ("drift", "a paired cases", "unchanged", False),
    ]
    assert (result.baseline, result.candidate, result.thresholds) == ("jax 0.9", "jax 0.10", "t.toml")
    # Every case run on both sides, largest error growth first (case 2 went from 0.3 to 5 bounds).
    assert [(d.implementation, d.case_id) for d in result.drift] == [("a", rb.case(s).case_id) for s in (2, 1)]


def test_incomplete_records_fail_on_either_side_once_anything_is_compared() -> None:
    b, c = _records(rb.case_record(BASE, rb.case(1))), _records(rb.case_record(CAND, rb.case(1)))
    b.problems.append("base/records/x.json")
    c.problems.append("cand/records/y.json")
    rows = gate.incomplete_rows(b, c)
    assert [(r.category, r.subject, r.status, r.fails) for r in rows] == [
        ("records", "baseline", "incomplete", True),
        ("records", "candidate", "incomplete", True),
    ]
    assert rows[1].detail == "unreadable or invalid record: cand/records/y.json"
    assert [r.status for r in gate.compare(b, c, _th()).rows] == ["incomplete", "incomplete", "unchanged", "unchanged"]
    empty = _records()
    empty.problems.append("z.json")
    assert gate.compare(empty, empty, _th()).rows == []  # nothing compared: bad input, never a verdict


RAGGED = "'ReshapeTransform' object has no attribute 'indices'"


def _cannot(run_id: str, kernel: str = "ragged", why: str = RAGGED) -> dict:
    return rb.run_record(run_id, status="cannot run here", cannot_run={kernel: why})


@pytest.mark.parametrize(
    ("base", "cand", "status", "change", "fails"),
    [
        pytest.param("cannot", "cannot", "not compared", "ran on neither side", False, id="neither"),
        pytest.param("ran", "cannot", "worse", "lost: cannot run in the candidate", True, id="lost"),
        pytest.param("cannot", "ran", "new", "runs only in the candidate", False, id="new"),
        pytest.param("cannot", "absent", "not compared", "ran on neither side", False, id="not-asked"),
    ],
)
def test_a_kernel_that_cannot_run_is_judged_by_where_it_ran(
    base: str, cand: str, status: str, change: str, fails: bool
) -> None:
    def side(run_id: str, how: str) -> list[dict]:
        passing = [rb.case_record(run_id, rb.case(1), implementation="a")]  # another kernel, fine on both sides
        if how == "cannot":
            return [_cannot(run_id), *passing]
        ran = [rb.case_record(run_id, rb.case(s), implementation="ragged") for s in (1, 2)]
        return [rb.run_record(run_id), *passing, *(ran if how == "ran" else [])]

    b, c = _records(*side(BASE, base)), _records(*side(CAND, cand))
    result = gate.compare(b, c, _th())
    (row,) = [r for r in result.rows if r.subject == "ragged" and r.category == "correctness"]
    assert (row.status, row.change, row.fails) == (status, change, fails)
    assert RAGGED in row.detail  # the reason, as the interpreter gave it
    assert result.failed == fails  # nothing else fails: a kernel that cannot run is not incomplete data
    assert not [r for r in result.rows if r.category == "records"]
    group = {"not compared": gate.Group.NOT_COMPARED, "worse": gate.Group.REGRESSIONS, "new": gate.Group.NEW}
    assert row.group == group[status]


def test_a_new_kernel_failing_in_the_candidate_is_a_new_failure() -> None:
    b = _records(_cannot(BASE))
    c = _records(rb.run_record(CAND), rb.case_record(CAND, rb.case(1), implementation="ragged", fail_quantity="out"))
    (row,) = gate.correctness_rows(b, c, _th())
    assert (row.status, row.change, row.fails) == ("worse", "+1 new failing", True)


def test_a_different_reason_on_each_side_names_both() -> None:
    b, c = _records(_cannot(BASE, why="old error")), _records(_cannot(CAND, why="new error"))
    (row,) = gate.correctness_rows(b, c, _th())
    assert row.detail == "baseline cannot run it: old error; candidate cannot run it: new error"
    b2 = _records(_cannot(BASE, why="same"))
    c2 = _records(_cannot(CAND, why="same"))
    assert gate.correctness_rows(b2, c2, _th())[0].detail == "cannot run on either side: same"
