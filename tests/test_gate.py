"""harness.gate and `python -m harness gate`: new failures, speed beyond noise, memory limits, thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import gate
from harness.cli import main
from harness.gate import thresholds
from harness.gate.thresholds import Limit, ThresholdError
from harness.store.read import load
from tests import record_builders as rb

BASE, CAND = "20261129T100000Z-ci-aaaaaa", "20261129T110000Z-ci-bbbbbb"
UPGRADE = {"jax": "0.11.0", "jaxlib": "0.11.0"}


def _gate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["gate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A passing baseline, and a candidate with one new failure, one speed regression and one memory growth."""
    base = rb.write_store(tmp_path / "base", rb.environment(BASE))
    recs = rb.environment(CAND, versions=UPGRADE, fail_seed=3)
    for r in recs:
        if r["kind"] == "bench" and r["pass"] == "fwd":
            r["samples"] = rb.timings(0.013)  # 1.3x slower than the baseline's 10 ms
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


def test_noise_and_small_moves_are_unchanged_real_speedups_better() -> None:
    b = _records(rb.bench_record(BASE, rb.timings(0.010, 10)))
    noisy = _records(rb.bench_record(CAND, rb.timings(0.010, 10, seed=5)))
    assert [r.status for r in gate.speed_rows(b, noisy, _th())] == ["unchanged"]
    slight = _records(rb.bench_record(CAND, rb.timings(0.0105, 10)))  # beyond noise, within the 1.10 factor
    (row,) = gate.speed_rows(b, slight, _th())
    assert row.status == "unchanged" and "within factor 1.1" in row.detail
    fast = _records(rb.bench_record(CAND, rb.timings(0.007, 10)))
    assert [r.status for r in gate.speed_rows(b, fast, _th())] == ["better"]


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
