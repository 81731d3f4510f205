"""harness.report and `python -m harness report`: the data step, escaping, self-containment, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.verdicts import Replay
from harness.gate import thresholds
from harness.report import compose, conventions, data, render
from harness.store.read import load
from tests import record_builders as rb

BASE, CAND = "20261129T100000Z-ci-aaaaaa", "20261129T110000Z-ci-bbbbbb"
SCRIPT = "<script>alert(1)</script>"
CONVENTIONS = {
    "pallas_flash": {"bias": "(QK^T + ab) * sm_scale", "causal": "top-left", "gqa": "repeat", "empty_rows": "uniform"},
    "torch_sdpa": {"bias": "QK^T * scale + attn_mask", "causal": "dense", "gqa": "repeat", "empty_rows": "zeros"},
}


def _report(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _with_conventions(recs: list[dict]) -> list[dict]:
    """Runs that record their conventions, so the report needs no registry (no jax import)."""
    for r in recs:
        if r["kind"] == "run":
            r["conventions"] = CONVENTIONS
    return recs


def _build(records, **kw) -> data.Report:
    return data.build(records, thresholds=thresholds.load(), conventions=conventions.collect(records), **kw)


def test_matrix_counts_and_worst_ratios(tmp_path: Path) -> None:
    recs = load([rb.write_store(tmp_path / "s", _with_conventions(rb.environment(BASE, fail_seed=3)))])
    m = data.matrix(recs.cases)
    assert m.dtypes == ["float32", "bfloat16"]
    rows = {(r.subject, r.mask): r for r in m.rows}
    assert [r.subject for r in m.rows[:2]] == ["pallas_flash", "pallas_flash"]  # the kernel before its oracles
    causal = rows[("pallas_flash", "causal_top_left")].cells[0]
    assert (causal.n, causal.failed, causal.worst_used, causal.css) == (3, 1, 5.0, "fail")
    plain = rows[("pallas_flash", "none")].cells[1]
    assert (plain.n, plain.failed, plain.css) == (3, 0, "pass")
    assert plain.worst_used == pytest.approx(0.1 + 0.05 * 4)  # seeds 0, 2, 4: the worst used 0.3 of its bound
    assert rows[("torch_sdpa", "none")].cells[0].worst_ratio == pytest.approx(1.1)


def test_histogram_counts_every_comparison(tmp_path: Path) -> None:
    recs = load([rb.write_store(tmp_path / "s", rb.environment(BASE, fail_seed=3))])
    hists = {h.implementation: h for h in data.histograms(recs.cases)}
    flash = hists["pallas_flash"]
    assert flash.n == sum(flash.counts) == 12 * 4
    assert flash.over_bound == 1 and flash.counts[-2] == 1  # 5x the bound: the [1e0.5, 1e1) bin


def test_environments_sort_by_version_numbers_not_text(tmp_path: Path) -> None:
    recs = []
    for i, v in enumerate(["0.10.2", "0.9.0", "0.11.0"]):
        recs.append(rb.run_record(f"2026112{i}T000000Z-h-{i}", versions={"jax": v}))
    envs, run_env = data.environments(load([rb.write_store(tmp_path / "s", recs)]))
    assert [e.label for e in envs] == ["jax 0.9.0", "jax 0.10.2", "jax 0.11.0"]
    assert run_env["20261121T000000Z-h-1"].label == "jax 0.9.0"


def test_speed_and_memory_movement_across_versions(tmp_path: Path) -> None:
    recs = rb.environment(BASE, bench_processes=8) + rb.environment(
        CAND, versions={"jax": "0.11.0"}, bench_median=0.013, temp=int(rb.MEMORY["temp"] * 1.1), bench_processes=8
    )
    report = _build(load([rb.write_store(tmp_path / "s", _with_conventions(recs))]))
    fwd = next(r for r in report.speed if r.label == "pallas_flash fwd mha_f32_256")
    assert fwd.group == "tpu_interpret (cpu:0)" and fwd.cells[0].movement is None
    mv = fwd.cells[1].movement
    assert mv.css == "worse" and mv.beyond_noise and mv.text.startswith("+30.0% slower (p=")
    mem = next(r for r in report.memory if r.group.startswith("v5e"))
    assert mem.cells[1].movement.text == "+10.0%" and mem.cells[1].movement.css == "worse"
    assert report.verdict.status == "pass"  # no baseline: the verdict covers correctness and compiles


def test_one_bug_two_shards_found_is_one_failure_with_the_other_as_an_example(tmp_path: Path) -> None:
    # The parent of `run --jobs` pointed the second shard's shrunk records at the bug's one failure file
    # (harness.running.jobs.same_bug.same_bugs): the report lists that bug once.
    store = tmp_path / "s"
    bug = store / "failures" / "bug.json"
    bug.parent.mkdir(parents=True)
    bug.write_text("{}")
    recs = [rb.run_record(BASE)]
    for seed in (3, 4):
        c = rb.case(seed, causal=True)
        recs.append(rb.case_record(BASE, c, fail_quantity="out", shrunk=True, failure_file=str(bug)))
    main_, other = data.failures(load([rb.write_store(store, recs)]), data.environments(load([store]))[1])
    assert len(main_) == 1 and len(other) == 1 and main_[0].repro == other[0].repro


def test_failures_carry_case_error_table_and_repro_command(tmp_path: Path) -> None:
    store = tmp_path / "s"
    recs = rb.environment(BASE, fail_seed=3)
    shrunk = next(r for r in recs if r.get("shrunk"))
    # The store moved since the run: the failure file is found in the store's failures/.
    moved = store / "failures" / Path(shrunk["failure_file"]).name
    moved.parent.mkdir(parents=True)
    moved.write_text("{}")
    report = _build(load([rb.write_store(store, _with_conventions(recs))]))
    (f,) = report.failures
    assert f.shrunk and f.kind == "case" and "seed=3" in f.title
    assert f.why == "out: err 5e-05 > bound 1e-05"
    # The card is the bug's rows (harness.store.bug_views): its error table among them, said once.
    (table,) = f.bug.tables
    assert [(c.quantity, c.passed) for c in table.comparisons][0] == ("out", False)
    rows = dict(f.rows)
    assert "5.00" in rows["error table"] and rows["replay"] == f"python -m harness repro {moved}"
    assert f.repro == f"python -m harness repro {moved}"
    assert report.verdict.status == "fail" and report.verdict.headline.startswith("FAILURES: 1 bug;")


def test_unfinished_runs_are_named_in_the_verdict(tmp_path: Path) -> None:
    recs = _with_conventions(rb.environment(BASE))
    recs[0]["status"] = "interrupted"
    report = _build(load([rb.write_store(tmp_path / "s", recs)]))
    # Incomplete data is never PASS, however clean the records it did finish.
    assert report.verdict.status == "fail"
    assert f"run {BASE} is 'interrupted', not finished: its records are only what it finished" in (
        report.verdict.details
    )


def test_compile_failures_are_listed(tmp_path: Path) -> None:
    recs = [
        rb.run_record(BASE),
        rb.compile_record(BASE, ok=False, error="lowering failed\nmore", failure_file="f.json"),
    ]
    report = _build(load([rb.write_store(tmp_path / "s", recs)]))
    (f,) = report.failures
    assert (f.kind, f.why) == ("compile", "lowering failed")
    assert (
        f.repro == "python -m harness compile --kernel pallas_flash --topology v5e:1x1 --shape mha_f32_256 --pass fwd"
    )
    assert report.verdict.status == "fail"


def test_script_tags_from_records_render_as_text(tmp_path: Path) -> None:
    recs = rb.environment(BASE)
    c = rb.case(9)
    recs.append(rb.case_record(BASE, c, error=SCRIPT, shrunk=True, failure_file=f"/x/{SCRIPT}.json"))
    recs[0]["versions"]["jax"] = SCRIPT
    recs[0]["machine"]["host"] = '"><img src=x onerror=alert(2)>'
    recs[0]["command"] = ["python", SCRIPT]
    recs.append(rb.bench_record(BASE, rb.timings(0.01), implementation=SCRIPT))
    html = render.render(_build(load([rb.write_store(tmp_path / "s", recs)])))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()
    assert "<img" not in html.lower() and "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in html


def test_the_html_is_self_contained(tmp_path: Path) -> None:
    recs = rb.environment(BASE) + rb.environment(CAND, versions={"jax": "0.11.0"}, fail_seed=1)
    html = render.render(_build(load([rb.write_store(tmp_path / "s", _with_conventions(recs))])))
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    # The only URL is the SVG namespace, which names a vocabulary and is never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(script|link|iframe|img|object|embed)\b", html, re.IGNORECASE)
    assert "url(" not in html and "@import" not in html
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', html))
    # Two histograms, speed fwd and fwd_bwd, memory v5e and v6e, and the trace, lowering and compile times.
    assert html.count("<svg") == 2 + 2 + 2 + 3


def test_report_command_exit_codes(capsys, tmp_path: Path) -> None:
    good = rb.write_store(tmp_path / "good", _with_conventions(rb.environment(BASE)))
    out_html = tmp_path / "out" / "index.html"
    code, out, _ = _report(capsys, "--store", str(good), "--out", str(out_html))
    assert code == 0 and "PASS" in out and out_html.is_file()
    bad = rb.write_store(tmp_path / "bad", _with_conventions(rb.environment(CAND, fail_seed=0)))
    code, out, _ = _report(capsys, "--store", str(bad), "--out", str(out_html))
    assert code == 1 and "FAILURES" in out
    code, _, err = _report(capsys, "--store", str(tmp_path / "none"), "--out", str(out_html))
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err
    code, _, err = _report(capsys, "--store", str(good), "--candidate", "jax=0.10.2", "--out", str(out_html))
    assert code == 2 and err.count("\n") == 1 and "--candidate needs --baseline" in err


def test_report_with_a_baseline_in_the_same_store(capsys, tmp_path: Path) -> None:
    recs = rb.environment(BASE, bench_processes=8)
    recs += rb.environment(CAND, versions={"jax": "0.11.0"}, bench_median=0.02, bench_processes=8)
    store = rb.write_store(tmp_path / "s", _with_conventions(recs))
    out_html = tmp_path / "index.html"
    code, out, _ = _report(capsys, "--store", str(store), "--baseline", "jax=0.10.2", "--out", str(out_html))
    assert code == 1 and "GATE FAILED: 2 regressions (speed 2)" in out
    html = out_html.read_text()
    assert 'id="gate"' in html and "baseline jax=0.10.2 (8 runs)" in html  # a run and 7 more bench processes
    assert "the other 8 runs in the stores" in html


def test_unreadable_records_are_reported_not_fatal(tmp_path: Path) -> None:
    store = rb.write_store(tmp_path / "s", _with_conventions(rb.environment(BASE)))
    (store / "records" / BASE / "broken.json").write_text("{not json")
    (store / "records" / BASE / "future.json").write_text(json.dumps({"schema": 99, "kind": "case", "run_id": BASE}))
    recs = load([store])
    assert len(recs.problems) == 2
    assert "unreadable" in recs.problems[0] and "record schema 99" in recs.problems[1]
    assert "Records that could not be read (2)" in render.render(_build(recs))


def test_conventions_come_from_runs_or_else_the_registry(tmp_path: Path) -> None:
    recorded = load([rb.write_store(tmp_path / "a", _with_conventions(rb.environment(BASE)))])
    rows, source = conventions.collect(recorded)
    assert [(r.implementation, r.empty_rows, r.source) for r in rows] == [
        ("pallas_flash", "uniform", "recorded in run.json"),
        ("torch_sdpa", "zeros", "recorded in run.json"),
    ]
    assert source.startswith("Read from the runs' run.json")
    plain = load([rb.write_store(tmp_path / "b", rb.environment(BASE))])
    rows, source = conventions.collect(plain)
    flash = rows[0]
    assert flash.source == "registry at report time" and "sm_scale" in flash.bias and flash.observed == "uniform"
    assert "read from this installation's registry" in source


def test_compose_needs_a_candidate_when_everything_is_baseline(tmp_path: Path) -> None:
    store = rb.write_store(tmp_path / "s", rb.environment(BASE))
    with pytest.raises(compose.SpecError, match="every run in the stores is in the baseline"):
        compose.make(load([store]), thresholds=thresholds.load(), baseline="jax=0.10.2")


# --- stores written by the real run, compile and bench commands ---

# Keys the real writers leave out of some records, so a builder may leave them out too:
# a passing case is not shrunk, and runs recorded before conventions were recorded lack them
# (the report then reads the registry: test_conventions_come_from_runs_or_else_the_registry).
# Where a failure's errors sit ("located") is kept on the shrunk failure only.
OPTIONAL = {"case": {"shrunk", "failure_file", "located"}, "run": {"conventions"}}
KEYED_BY_NAME = {"placement", "conventions", "api_parameters"}


@pytest.fixture(scope="session")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rb.real_store(tmp_path_factory)


def _same_fields(real: dict, built: dict, where: str, optional: set[str] = frozenset()) -> list[str]:
    """Where `built` differs from `real` in keys or value types, nested dicts included.

    A null on either side matches any type (an optional figure); an empty dict matches any dict.
    """
    problems = [f"{where}: builder lacks {k!r}" for k in sorted(real.keys() - built.keys() - optional)]
    problems += [f"{where}: builder adds {k!r}, not written" for k in sorted(built.keys() - real.keys() - optional)]
    for k in sorted(real.keys() & built.keys()):
        a, b = real[k], built[k]
        if isinstance(a, dict) and isinstance(b, dict):
            # A map keyed by implementation name holds the run's own names: compared as a map only.
            problems += _same_fields(a, b, f"{where}.{k}") if a and b and k not in KEYED_BY_NAME else []
        elif None not in (a, b) and type(a) is not type(b) and not {type(a), type(b)} <= {int, float}:
            problems.append(f"{where}.{k}: {type(b).__name__} in the builder, {type(a).__name__} from the writer")
    return problems


REPLAYED = Replay(interpreter="fast", passed=False)


def test_builders_write_the_fields_the_real_writers_write(real_store: Path) -> None:
    real = {}
    for rec in rb.real_records(real_store):
        real.setdefault((rec["kind"], rec.get("passed")), rec)
    c = rb.case()
    built = {
        ("run", None): rb.run_record(BASE),
        ("case", True): rb.case_record(BASE, c),
        ("case", False): rb.case_record(
            BASE, c, fail_quantity="out", shrunk=True, failure_file="/x/f.json", replays=[REPLAYED]
        ),
        ("bench", True): rb.bench_record(BASE, rb.timings(0.01)),
        ("compile", True): rb.compile_record(BASE),
    }
    assert built.keys() <= real.keys(), sorted(real)
    problems = [
        p for key, rec in built.items() for p in _same_fields(real[key], rec, key[0], OPTIONAL.get(key[0], set()))
    ]
    assert not problems, problems


def test_report_of_a_store_written_by_run_compile_and_bench(capsys, tmp_path: Path, real_store: Path) -> None:
    out_html = tmp_path / "index.html"
    code, out, _ = _report(capsys, "--store", str(real_store), "--out", str(out_html))
    assert code == 1 and "FAILURES" in out  # the fake BROKEN kernel's shrunk failure
    report = _build(load([real_store]))
    (failure,) = [f for f in report.failures if f.shrunk]
    assert failure.kind == "case" and failure.implementation == "tests._fakes:BROKEN"
    assert "Lk=32 D=64" in failure.title  # BROKEN fails on head_dim 64 with 32 keys
    assert failure.why.startswith("tests._fakes:BROKEN: out: err") and "> bound" in failure.why
    # Its shrink budget (--max-shrinks 3) spent before the trigger search: no trigger to say.
    bug = failure.bug
    assert bug.trigger is None and bug.finding is None and bug.inherited_from is None
    replay = failure.repro.removeprefix("python -m harness repro ")
    assert Path(replay).is_file() and Path(replay).parent == real_store / "failures"
    assert any(r.label == "jax_xla fwd mha_f32_256" for r in report.speed), [r.label for r in report.speed]
    assert any(r.group.startswith("v5e") for r in report.memory)
    html = out_html.read_text()
    assert "tests._fakes:CORRECT" in html and "torch_sdpa" in html and "<dt>trigger</dt>" not in html


def test_each_cell_and_kernel_shows_its_verdict_and_api_coverage(tmp_path: Path) -> None:
    old = rb.environment("20261120T000000Z-old-1", versions={"jax": "0.9.2"}, fail_seed=2)
    new = rb.environment("20261121T000000Z-new-1", versions={"jax": "0.10.2"})
    recs = load([rb.write_store(tmp_path / "s", old + new)])
    report = _build(recs)
    rows = {(r.cell, r.implementation): r for r in report.cells}
    old_flash = rows[("py3.11-jax0.9.2-torch2.13.0", "pallas_flash")]
    new_flash = rows[("py3.11-jax0.10.2-torch2.13.0", "pallas_flash")]
    assert (old_flash.verdict, new_flash.verdict) == ("FAIL", "PASS")
    # The builders' records exercise q, k and v of the 8 parameters run.json declares drawn.
    assert (new_flash.cases, new_flash.exercised, new_flash.drawn) == (12, 3, 8)
    # Cells in version order; the later one ran exactly the earlier one's cases.
    assert (old_flash.same_cases_as, new_flash.same_cases_as) == (None, "py3.11-jax0.9.2-torch2.13.0")
    html = render.render(report)
    assert "Per matrix cell: verdict and API coverage" in html and "3/8" in html


def test_each_run_shows_the_pairwise_coverage_of_each_kernel_it_searched(tmp_path: Path) -> None:
    recs = load([rb.write_store(tmp_path / "s", _with_conventions(rb.environment(BASE)))])
    (run,) = _build(recs).runs
    (kernel, line, missing) = run.pairwise[0]
    assert kernel == "pallas_flash" and line.startswith("pairwise coverage of declared features in the first 12")
    assert "98% (80/82 pairs; 14/15 features)" in line
    html = render.render(_build(recs))
    assert line in html and "2 pairs no case had" in html and "mask:bias + tiling:several_minor" in html


def test_a_run_without_pairwise_coverage_shows_none_and_a_bad_one_says_so(tmp_path: Path) -> None:
    recs = _with_conventions(rb.environment(BASE))
    (run,) = [r for r in recs if r["kind"] == "run"]
    oracle = {"kernel": "torch_sdpa (oracle)", "oracle": True, "examples": 12, "failed": 0, "worst": None}
    run["summary"] = [{**run["summary"][0], "pairwise": {"cases": 3}}, oracle | {"seconds": 1.0, "status": "PASS"}]
    (view,) = _build(load([rb.write_store(tmp_path / "s", recs)])).runs
    assert view.pairwise == [("pallas_flash", view.pairwise[0][1], ())]
    assert view.pairwise[0][1].startswith("unreadable pairwise coverage") and "missing fields" in view.pairwise[0][1]


def test_compile_times_and_kernels_per_version_and_the_codegen_diff(tmp_path: Path) -> None:
    from tests.test_gate_compile_time import _kernel, _samples

    recs = rb.environment(BASE) + rb.environment(CAND, versions={"jax": "0.11.0"})
    for r in recs:
        if r["kind"] == "compile" and r["run_id"] == CAND and r["pass"] == "fwd":
            r["samples"] = _samples(0.4)  # trace 4x slower than the builders' 0.1 s
            r["kernels"] = [_kernel("func.func @main() {\n  %0 = tpu.iota\n}")]
    records = load([rb.write_store(tmp_path / "s", _with_conventions(recs))])
    report = _build(records)
    trace = next(r for r in report.compile_times if r.group == "trace" and r.label == "pallas_flash fwd mha_f32_256")
    assert trace.cells[1].movement.css == "worse" and "slower" in trace.cells[1].movement.text
    lower = next(r for r in report.compile_times if r.group == "lower" and r.label == "pallas_flash fwd mha_f32_256")
    assert lower.cells[1].movement.css == "same"
    fwd = next(r for r in report.kernels if r.label == "pallas_flash fwd mha_f32_256")
    both = next(r for r in report.kernels if r.label == "pallas_flash fwd_bwd mha_f32_256")
    assert fwd.cells[1].movement.text == "changed" and both.cells[1].movement.text == "same code"
    gated, _ = compose.make(records, thresholds=thresholds.load(), baseline="jax=0.10.2", candidate="jax=0.11.0")
    html = render.render(gated)
    assert "Code generation changed" in html and "+  %0 = tpu.iota" in html
    assert "Trace, lowering and compile time" in html and "Generated kernels" in html


def test_interpreter_divergences_are_listed_apart_and_each_failure_says_which_interpreter_saw_what(
    tmp_path: Path,
) -> None:
    recs = _with_conventions(rb.environment(BASE, seeds=range(2)))
    fast_failed = {
        "interpreter": "fast",
        "passed": False,
        "error": None,
        "comparisons": [rb.comparison("out", 5.0), rb.comparison("out[vs faithful]", 4.0)],
        "seconds": 0.1,
    }
    diverged, failed = rb.case(7), rb.case(8)
    recs.append(rb.case_record(BASE, diverged, interpreter="faithful", shadow=fast_failed))
    recs.append(rb.case_record(BASE, failed, fail_quantity="out", interpreter="faithful", shadow=fast_failed))
    # Before there were two interpreters a record named none: it ran the faithful one.
    recs.append(rb.case_record(BASE, rb.case(9), fail_quantity="dq"))
    report = _build(load([rb.write_store(tmp_path / "s", recs)]))
    (d,) = report.divergences
    assert d.kind == "divergence" and "seed=7" in d.title
    assert d.why == (
        "on the faithful interpreter passed; on the fast interpreter failed: out: err 5e-05 > bound 1e-05; "
        "out[vs faithful]: err 4e-05 > bound 1e-05"
    )
    assert "1 interpreter divergence (fast against faithful interpreter; not counted against kernels)" in (
        report.verdict.details
    )
    assert "2 failing cases of" in report.verdict.headline  # the divergence is not one of them
    said = {f.title.split("seed=")[1].split()[0]: f.interpreters for f in report.failures + report.other_failures}
    assert said["8"].startswith("on the faithful interpreter failed: out: err 5e-05 > bound 1e-05; on the fast")
    assert said["9"] == "computed on the faithful interpreter"
    html = render.render(report)
    assert 'id="divergences"' in html and "Interpreter divergences (1)" in html


def test_a_failure_card_says_its_trigger_the_finding_it_is_and_what_upstream_fails_alike(
    tmp_path: Path, real_store: Path
) -> None:
    # Read from its failure file (harness.store.bug.Found), as `run` writes them after the trigger search.
    store = rb.copy_store(real_store, tmp_path / "store")
    (path,) = (store / "failures").glob("*.json")
    for rec in (store / "records").glob("*/*.json"):  # the copy's records name the copy's failure file
        rec.write_text(rec.read_text().replace(str(real_store / "failures"), str(store / "failures")))
    doc = json.loads(path.read_text())
    words = "fails when: a bias mask alone (shown needed: the same case without it passes)"
    doc["search"] |= {"trigger": ["mask:bias"], "trigger_words": words, "finding": "some_finding", "expected": True}
    doc["search"] |= {"inherited_from": "pallas_flash"}
    path.write_text(json.dumps(doc))
    (failure,) = [f for f in _build(load([store])).failures if f.shrunk]
    bug = failure.bug
    assert (bug.trigger, bug.finding, bug.expected, bug.inherited_from) == (words, "some_finding", True, "pallas_flash")
    html = render.render(_build(load([store])))
    assert f"<dt>trigger</dt><dd>{words}</dd>" in html
    assert "<dt>known finding</dt><dd>some_finding (expected: --known)</dd>" in html
    assert "<dd>upstream pallas_flash, as installed, fails this case the same way" in html
    # A search the store cannot read: the failure is shown all the same, without them.
    doc["search"]["trigger"] = "mask:bias"
    path.write_text(json.dumps(doc))
    (failure,) = [f for f in _build(load([store])).failures if f.shrunk]
    assert failure.bug.trigger is None and "out: err" in failure.why
