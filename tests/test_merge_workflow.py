"""The merge job of the cell workflows (harness.cli.commands.merge, harness.store.files.merge_stores).

Every cell's artifact merges into one store whatever order they arrive in, and the report rendered from it is the
same bytes; `merge --expect-cells SESSION` names each cell that could not run and exits 1.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.cli.commands.merge import ARTIFACT_PREFIX, JOB_STATUS_FILE, cell_outcomes
from harness.core.case import Case
from harness.environments.matrix import SESSIONS
from harness.gate.thresholds import load
from harness.report import compose
from harness.running.runner import CaseResult, SubjectResult
from harness.store import read
from harness.store.failures import FailureRecord
from harness.store.files import RunStore, merge_stores
from harness.store.records import BenchRecord
from harness.store.schema import RunStatus

ROOT = Path(__file__).resolve().parents[1]
CASE = Case(batch=1, q_heads=2, kv_heads=2, q_len=128, kv_len=128, head_dim=64)
CELLS = [c.name for c in SESSIONS["matrix"]]


def _cell_store(root: Path, host: str, *, passed: bool, seconds: float) -> None:
    """A store as one cell job leaves it: a run, one case (failing: with its failure file) and one benchmark.

    Every cell writes the same case id and the same failure file name, with different contents.
    """
    store = RunStore.create(root, meta={"command": ["run"]}, implementations=())
    subject = SubjectResult(
        implementation="pallas_flash",
        role="kernel",
        backend="tpu_interpret",
        empty_rows="uniform",
        passed=passed,
        error=None if passed else f"wrong on {host}",
        comparisons=[],
        seconds=seconds,
    )
    name = f"failures/{CASE.case_id}.json"
    store.write_case(CaseResult(case=CASE, subjects=[subject]), shrunk=not passed, failure_file=name)
    bench = BenchRecord(
        run_id=store.run_id, implementation="pallas_flash", shape={"name": "tiny"}, pass_="fwd", samples=[seconds]
    )
    store.write(bench)
    store.write_meta({"command": ["run"], "status": RunStatus.FINISHED})
    case = CASE.to_json()
    failure = FailureRecord(kernel="pallas_flash", oracles=("torch_sdpa",), grads=True, case=case, failure=host)
    (root / "failures").mkdir(exist_ok=True)
    (root / name).write_text(json.dumps(failure.to_json()))


@pytest.fixture(scope="module")
def cell_stores(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three cells' artifacts, as the merge job downloads them: two failing the same case, one passing it."""
    root = tmp_path_factory.mktemp("artifacts")
    stores = [root / f"{ARTIFACT_PREFIX}{name}" for name in CELLS[:3]]
    for i, (store, passed) in enumerate(zip(stores, (False, True, False), strict=True)):
        _cell_store(store, f"machine-{i}", passed=passed, seconds=1.0 + i)
        (store / JOB_STATUS_FILE).write_text("success\n")
    return stores


def _files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def _merged(stores: list[Path], where: Path) -> tuple[dict[str, bytes], bytes]:
    """The files of `stores` merged into `where` (created), and the report `harness report --store` renders of it
    (its time fixed: it names when). `where` is removed after: each order merges into the same path, which the
    report names (its replay commands)."""
    merge_stores(stores, where)
    report, _ = compose.make(read.load([where]), thresholds=load(None))
    report.generated = "2026-12-07 00:00 UTC"
    page = compose.write(report, where.with_suffix(".html")).read_bytes()
    files = _files(where)
    shutil.rmtree(where)
    return files, page


def test_the_merged_store_and_its_report_are_the_same_whatever_order_the_stores_arrive_in(tmp_path, cell_stores):
    files, page = _merged(cell_stores, tmp_path / "store")
    # Every cell's failure file of the one case is kept: one under its own name, the others beside it.
    assert len([f for f in files if f.startswith("failures/")]) == len(cell_stores)
    assert b"wrong on machine-2" in page  # the failures are on the page, not an empty report
    assert (files, page) == _merged(list(reversed(cell_stores)), tmp_path / "store")
    assert (files, page) == _merged([cell_stores[1], cell_stores[2], cell_stores[0]], tmp_path / "store")


def _artifacts(tmp_path: Path, cell_stores: list[Path]) -> list[Path]:
    """The three stores as artifacts in a fresh directory, so that a test may change one."""
    out = []
    for store in cell_stores:
        copy = tmp_path / store.name
        merge_stores([store], copy)
        (copy / JOB_STATUS_FILE).write_text((store / JOB_STATUS_FILE).read_text())
        out.append(copy)
    return out


def test_every_cell_that_ran_is_counted_and_a_missing_one_is_named(tmp_path, cell_stores, capsys):
    sources = _artifacts(tmp_path, cell_stores)
    code = cli.main(["merge", *map(str, sources), "--out", str(tmp_path / "merged"), "--expect-cells", "matrix"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"cells of matrix: 3 of {len(CELLS)} ran" in out
    for name in CELLS[3:]:
        assert f"cell {name} could not run: no store arrived" in out
    for name in CELLS[:3]:
        assert f"cell {name} " not in out
    assert len(list((tmp_path / "merged" / "records").iterdir())) == 3  # what there is, merged


def test_a_cell_whose_job_failed_is_named_and_its_records_still_merged(tmp_path, cell_stores):
    sources = _artifacts(tmp_path, cell_stores)
    (sources[1] / JOB_STATUS_FILE).write_text("failure\n")
    (sources[2] / JOB_STATUS_FILE).unlink()
    empty = tmp_path / f"{ARTIFACT_PREFIX}{CELLS[3]}"  # a job that failed installing: its status, no store
    empty.mkdir()
    (empty / JOB_STATUS_FILE).write_text("cancelled\n")
    outcomes = {o.name: o.problem for o in cell_outcomes(CELLS, [*sources, empty])}
    assert outcomes[CELLS[0]] is None
    failed = "could not run to the end: its job failed"
    assert outcomes[CELLS[1]] == f"{failed} (job status 'failure'); its records are merged"
    assert "no job status recorded" in outcomes[CELLS[2]]
    assert outcomes[CELLS[3]] == f"{failed} (job status 'cancelled'); it recorded nothing"
    assert all("no store arrived" in outcomes[name] for name in CELLS[4:])


def test_every_cell_that_ran_exits_0(tmp_path, cell_stores, monkeypatch):
    monkeypatch.setitem(SESSIONS, "matrix", SESSIONS["matrix"][:3])
    sources = _artifacts(tmp_path, cell_stores)
    assert cli.main(["merge", *map(str, sources), "--out", str(tmp_path / "merged"), "--expect-cells", "matrix"]) == 0


def test_no_artifact_at_all_names_every_cell(tmp_path, capsys):
    assert cli.main(["merge", "--out", str(tmp_path / "merged"), "--expect-cells", "history"]) == 1
    out = capsys.readouterr().out
    assert all(f"cell {c.name} could not run: no store arrived" in out for c in SESSIONS["history"])


def _exit_code(argv: list[str]) -> int:
    """cli.main's exit code, argparse's own refusals (SystemExit) included."""
    try:
        return cli.main(argv)
    except SystemExit as e:
        return int(e.code)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["merge", "--out", "m"], "no STORE to merge", id="no-store"),
        pytest.param(["merge", "other", "--out", "m", "--expect-cells", "matrix"], "is not the artifact", id="stray"),
        pytest.param(["merge", "s", "--out", "m", "--expect-cells", "nightly"], "invalid choice", id="unknown-session"),
    ],
)
def test_bad_merge_usage_exits_2_naming_the_fix(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert _exit_code(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


MERGE_JOB = yaml.safe_load((ROOT / ".github" / "workflows" / "cells.yml").read_text())["jobs"]["merge"]


def _merge_job(tmp_path: Path, session: str, artifacts: list[Path]) -> list[subprocess.CompletedProcess[str]]:
    """The merge job's script steps after its download (artifacts/store-*), run in order in a fresh directory as the
    workflow runs them (each step runs whatever the last exited: they are `if: always()` or first)."""
    work = tmp_path / "job"
    for store in artifacts:
        shutil.copytree(store, work / "artifacts" / store.name)
    (work / "artifacts").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SESSION": session, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    steps = [s for s in MERGE_JOB["steps"] if "run" in s and "pip install" not in s["run"]]
    assert all(s.get("if") == "always()" for s in steps[1:])
    return [
        subprocess.run(["bash", "-e", "-c", s["run"]], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        for s in steps
    ]


def test_the_merge_jobs_commands_are_options_the_cli_has():
    lines = [ln.strip() for s in MERGE_JOB["steps"] for ln in s.get("run", "").splitlines()]
    commands = [shlex.split(ln.replace("$SESSION", "matrix"))[3:] for ln in lines if ln.startswith("python -m harness")]
    assert [argv[0] for argv in commands] == ["merge", "report"]
    merge, report = (cli.build_parser().parse_args(argv) for argv in commands)
    assert (merge.expect_cells, merge.out, report.store) == ("matrix", Path("reports/store"), [Path("reports/store")])


@pytest.mark.slow  # two `python -m harness` processes: 15 to 20 s measured on 2 busy cores
def test_the_merge_job_names_the_missing_cells_and_gates_on_the_failing_records(tmp_path, cell_stores):
    assert MERGE_JOB["if"] == "always()" and MERGE_JOB["needs"] == ["cells", "cell"]
    (download,) = [s for s in MERGE_JOB["steps"] if s.get("uses", "").startswith("actions/download-artifact")]
    assert download["with"] == {"pattern": f"{ARTIFACT_PREFIX}*", "path": "artifacts"}
    merge, report = _merge_job(tmp_path, "matrix", cell_stores)
    assert merge.returncode == 1, merge.stderr
    assert all(f"cell {name} could not run: no store arrived" in merge.stdout for name in CELLS[3:])
    assert report.returncode == 1, report.stderr  # two cells failed their case
    assert (tmp_path / "job" / "reports" / "index.html").is_file()
    (upload,) = [s for s in MERGE_JOB["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["if"] == "always()" and upload["with"]["path"] == "reports/index.html"


@pytest.mark.slow  # two `python -m harness` processes: 15 to 20 s measured on 2 busy cores
def test_the_merge_job_passes_when_every_cell_ran_and_passed(tmp_path):
    artifacts = []
    for i, cell in enumerate(SESSIONS["history"]):
        store = tmp_path / "artifacts" / f"{ARTIFACT_PREFIX}{cell.name}"
        _cell_store(store, f"machine-{i}", passed=True, seconds=1.0)
        (store / JOB_STATUS_FILE).write_text("success\n")
        artifacts.append(store)
    merge, report = _merge_job(tmp_path, "history", artifacts)
    assert (merge.returncode, report.returncode) == (0, 0), merge.stdout + merge.stderr + report.stderr
    assert f"cells of history: {len(artifacts)} of {len(artifacts)} ran" in merge.stdout
