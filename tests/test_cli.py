"""The run command end to end: exit codes, records on disk, planted bugs caught."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.case import Case
from harness.core.contract import resolve
from harness.core.masks import Mask
from harness.running.failures import load_failure
from harness.running.runner import run_case

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["run", "--kernel", "nonesuch"], "unknown implementation 'nonesuch'", id="kernel"),
        pytest.param(["run", "--oracle", "pallas_flash"], "is a kernel", id="oracle-role"),
        pytest.param(["run", "--profile", "weekly"], "unknown profile 'weekly'", id="profile"),
        pytest.param(["run", "--examples", "0"], "--examples=0 must be at least 1", id="examples"),
        pytest.param(["run", "--examples", "many"], "invalid int value", id="examples-type"),
        pytest.param(["run", "--colour"], "unrecognized arguments", id="option"),
        pytest.param(
            ["run", "--detect-races", "--interpreter", "fast"],
            "--detect-races and --grid-order-seed need --interpreter faithful, not fast",
            id="interpreter-checks",
        ),
        pytest.param(["run", "--interpreter", "hlo"], "invalid choice: 'hlo'", id="interpreter"),
        pytest.param(["fly"], "invalid choice", id="command"),
    ],
)
def test_bad_usage_exits_2_with_one_line(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)] if argv[0] == "run" else argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_upstream_kernel_passes_and_every_case_is_on_disk(tmp_path, capsys):
    assert main(["run", "--examples", "2", "--seed", "1", "--out", str(tmp_path), "--no-database"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "Pallas TPU interpreter" in out
    (run_dir,) = (tmp_path / "records").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "finished" and meta["versions"]["jax"]
    cases = [json.loads(p.read_text()) for p in run_dir.glob("*--*.json")]
    assert {c["implementation"] for c in cases} == {"pallas_flash", "torch_sdpa"}
    assert len(cases) == 4 and all(c["passed"] and c["schema"] == 1 for c in cases)
    assert all(Case.from_json(c["case"]).case_id == c["case_id"] for c in cases)


def test_a_planted_forward_bug_given_as_a_drop_in_exits_1_with_a_replay_command(tmp_path):
    # One case, forward only: the first smoke case (causal, equal lengths) fails on the planted forward bug, and
    # each assertion below is about that failure; the gradients and more drawn cases would only add interpreted runs.
    kernel = "tests.planted.fwd_causal_off_by_one:flash_attention"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--kernel",
            kernel,
            "--profile",
            "ci",
            "--examples",
            "1",
            "--no-grads",
            "--out",
            str(tmp_path),
            "--no-database",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    # A float16 case is refused (exit 2) at a --xla_cpu_max_isa without it (harness.runtime.isa), said by the run's
    # own fresh process: this one's backend may have started before a test changed XLA_FLAGS.
    if proc.returncode == 2 and "a float16 case has no ruler here" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout and "python -m harness repro" in proc.stdout
    assert "where the error sits" in proc.stdout and "out: past the bound" in proc.stdout
    (failure,) = (tmp_path / "failures").glob("*.json")
    doc = json.loads(failure.read_text())
    assert doc["kernel"] == kernel
    shrunk = Case.from_json(doc["case"])
    assert shrunk.mask.causal == "top_left"  # the bug lives in the causal mask
    assert doc["search"]["trigger"] == ["mask:causal_top_left"], doc["search"].get("trigger_words")
    # The smoke case it met first (causal, 128 queries on 256 keys) reduced over its features: its lengths made
    # equal by growing the queries (no key tile lost with them), its tiles edited away, the same data.
    assert (shrunk.batch, shrunk.q_heads) == (1, 1) and shrunk.q_len == shrunk.kv_len <= 256


def test_a_planted_backward_only_bug_is_caught_by_the_gradients_alone():
    kernel = resolve("tests.planted.bwd_dkv_causal:flash_attention")
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, mask=Mask(causal="top_left"))
    forward = run_case(case, [kernel], grads=False)
    assert forward.passed, "the bug must be invisible to the forward pass"
    result = run_case(case, [kernel])
    failed = {c.quantity for c in result.subjects[0].comparisons if not c.passed}
    assert failed == {"dk", "dv"}  # the dq kernel and the output are right


# --- every bad input exits 2 with one line, every harness failure 3 with a saved traceback ---


def _out_is_a_file(tmp: Path) -> list[str]:
    (tmp / "store").write_text("")
    return ["run", "--kernel", "tests._fakes:CORRECT", "--out", str(tmp / "store")]


def _out_under_a_file(tmp: Path) -> list[str]:
    (tmp / "file").write_text("")  # a directory under a file cannot be made (as root too, unlike chmod)
    return ["run", "--kernel", "tests._fakes:CORRECT", "--out", str(tmp / "file" / "store")]


def _huge_repro(tmp: Path) -> list[str]:
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=16, head_dim=32).to_json()
    case["batch"] = 10**9
    doc = {"schema": 1, "kind": "failure", "kernel": "tests._fakes:CORRECT", "oracles": [], "grads": False}
    (tmp / "huge.json").write_text(json.dumps({**doc, "case": case}))
    return ["repro", str(tmp / "huge.json")]


def _wrong_types_record(tmp: Path) -> list[str]:
    run = tmp / "store" / "records" / "r1"
    run.mkdir(parents=True)
    meta = {"schema": 1, "kind": "run", "run_id": "r1", "status": "finished"}
    (run / "run.json").write_text(json.dumps(meta))
    bad = {"schema": 1, "kind": "case", "run_id": "r1", "implementation": 3, "case_id": "c", "passed": "yes"}
    (run / "c--k.json").write_text(json.dumps({**bad, "comparisons": {}}))
    return ["report", "--store", str(tmp / "store"), "--out", str(tmp / "index.html")]


def _report_out_is_a_dir(tmp: Path) -> list[str]:
    return ["report", "--store", str(tmp), "--out", str(tmp)]


def _corrupt_merge_source(tmp: Path) -> list[str]:
    for name in ("a", "b"):
        (tmp / name / "records" / f"run-{name}").mkdir(parents=True)
        (tmp / name / "records" / f"run-{name}" / "run.json").write_text('{"kind": "run"}')
    (tmp / "b" / "records" / "run-b" / "case.json").write_text('{"kind": "ca')  # truncated
    return ["merge", str(tmp / "a"), str(tmp / "b"), "--out", str(tmp / "merged")]


def _no_pytest(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setitem(sys.modules, "pytest_benchmark", None)  # importing it raises ImportError
    return ["bench", "--out", str(tmp / "store")]


@pytest.mark.parametrize(
    ("make_argv", "code", "message"),
    [
        pytest.param(_out_is_a_file, 2, "is a file; give a directory", id="out-is-a-file"),
        pytest.param(_out_under_a_file, 2, "cannot be written", id="out-unwritable"),
        pytest.param(
            lambda tmp: ["run", "--kernel", "tests.fixtures.raises_on_import:f", "--out", str(tmp)],
            2,
            "failed to load: RuntimeError: this drop-in module is broken at import",
            id="kernel-raises-on-import",
        ),
        pytest.param(
            lambda tmp: ["run", "--case-timeout", "nan", "--out", str(tmp)],
            2,
            "--case-timeout=nan must be a positive number",
            id="case-timeout-nan",
        ),
        pytest.param(_huge_repro, 2, "GiB to replay", id="repro-huge-batch"),
        pytest.param(_wrong_types_record, 2, "case record with implementation=3", id="report-wrong-types"),
        pytest.param(_report_out_is_a_dir, 2, "is a directory; give the HTML file", id="report-out-dir"),
        pytest.param(_corrupt_merge_source, 2, "is not JSON", id="merge-corrupt-source"),
        pytest.param(_no_pytest, 2, "bench needs pytest and pytest-benchmark", id="bench-without-pytest"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_no_traceback(make_argv, code, message, tmp_path, capsys, monkeypatch):
    argv = make_argv(tmp_path, monkeypatch) if make_argv is _no_pytest else make_argv(tmp_path)
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "merged").exists()  # a merge that fails copies nothing


def test_a_disk_error_mid_run_is_a_harness_failure_not_a_flaky_kernel(tmp_path, capsys, monkeypatch):
    from tests.fixtures.misbehaving import BREAKS_STORE

    monkeypatch.setenv(BREAKS_STORE.STORE_ENV, str(tmp_path / "store"))
    monkeypatch.setenv("ATTN_HARNESS_CRASH_DIR", str(tmp_path / "crash"))
    argv = ["run", "--kernel", "tests.fixtures.misbehaving:BREAKS_STORE", "--oracle", "jax_reference"]
    assert main([*argv, "--examples", "6", "--seed", "1", "--no-grads", "--out", str(tmp_path / "store")]) == 3
    captured = capsys.readouterr()
    assert "flaky" not in captured.out + captured.err
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("harness failure: ") and "traceback saved to" in line
    (saved,) = (tmp_path / "crash").glob("harness-crash-*.txt")
    assert str(saved) in line and "Traceback (most recent call last)" in saved.read_text()


def test_an_oracle_off_its_tolerance_is_a_finding_not_a_kernel_failure(tmp_path, capsys):
    argv = ["run", "--kernel", "tests._fakes:CORRECT", "--oracle", "tests.fixtures.misbehaving:OFF_ORACLE"]
    # No smoke cases, no pool and no kernel worker: finding a fake kernel's smoke set and starting a worker process
    # cost more than the check.
    argv += ["--no-smoke", "--no-pool", "--in-process", "--examples", "3", "--seed", "1", "--no-grads"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ORACLE FINDING" in out and "tests.fixtures.misbehaving:OFF_ORACLE (oracle)" in out
    assert "FAIL tests._fakes:CORRECT" not in out
    assert not (tmp_path / "failures").exists()  # no failure file blames the kernel
    (meta,) = tmp_path.glob("records/*/run.json")
    rows = {r["kernel"]: r["status"] for r in json.loads(meta.read_text())["summary"]}
    assert rows == {"tests._fakes:CORRECT": "PASS", "tests.fixtures.misbehaving:OFF_ORACLE (oracle)": "ORACLE FINDING"}


def _run_broken(out: Path, shrinks: str) -> int:
    """A run of tests._fakes:BROKEN that fails on one drawn case of four, with `shrinks` shrink runs (its trigger
    searched past them). No smoke cases, no pool and no kernel worker: finding a fake kernel's smoke set and starting
    a worker process cost more than the run (the worker: tests/test_faults.py)."""
    argv = ["run", "--kernel", "tests._fakes:BROKEN", "--examples", "4", "--seed", "1", "--no-grads", "--jobs", "1"]
    argv += ["--no-smoke", "--no-pool", "--in-process"]
    return main([*argv, "--max-shrinks", shrinks, "--out", str(out)])


@pytest.fixture(scope="module")
def broken_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One failing run and its report, written under umask 022: what the umask test and the trigger test read.
    Shared, as each run starts a kernel worker, shrinks its failure and searches its trigger."""
    out = tmp_path_factory.mktemp("broken")
    old = os.umask(0o022)
    try:
        assert _run_broken(out, "60") == 1
        assert main(["report", "--store", str(out), "--out", str(out / "index.html")]) == 1
    finally:
        os.umask(old)
    return out


def test_records_and_failure_files_are_written_with_the_umask_not_0600(broken_store):
    files = [*broken_store.glob("records/*/*.json"), *broken_store.glob("failures/*.json"), broken_store / "index.html"]
    assert any("failures" in str(p) for p in files)
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o644)}


@pytest.mark.parametrize("shrinks", ["0", "60"])
def test_a_failure_is_written_whether_or_not_its_trigger_was_found(tmp_path, shrinks, request):
    # No shrink run left: the failure is reported as found, without a trigger (a splash run crashed writing it).
    if shrinks == "60":
        out = request.getfixturevalue("broken_store")
    else:
        out = tmp_path
        assert _run_broken(out, shrinks) == 1
    (path,) = out.glob("failures/*.json")
    search_info = load_failure(path).record.search
    assert ("trigger_words" in search_info) is (shrinks != "0"), search_info
