"""The cell workflows have a job per cell of harness/environments/matrix.py, each run as its nox session.

matrix.yml, history.yml and torch-history.yml each call cells.yml with one session of SESSIONS; its first job
prints that session's cells as a JSON list, and the cell job's matrix is that list. This runs the first job's
script as the workflow does, for every caller, and checks every cell of the module comes out, each a session
nox lists. tests/test_merge_workflow.py runs the merge job's steps.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli.commands.merge import ARTIFACT_PREFIX, JOB_STATUS_FILE
from harness.environments.matrix import CELLS, HISTORY_CELLS, SESSIONS, TORCH_HISTORY_CELLS

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CELLS_WORKFLOW = yaml.safe_load((WORKFLOWS / "cells.yml").read_text())
# The workflow that runs each session's cells, by file name.
CALLERS = {"matrix": "matrix.yml", "history": "history.yml", "torch_history": "torch-history.yml"}


def _cells_printed(tmp_path: Path, session: str) -> list[dict[str, str]]:
    """The cells job's output, as its script writes it to $GITHUB_OUTPUT (`python` is this interpreter)."""
    (step,) = [s for s in CELLS_WORKFLOW["jobs"]["cells"]["steps"] if s.get("id") == "cells"]
    output = tmp_path / "github_output"
    env = {
        **os.environ,
        "GITHUB_OUTPUT": str(output),
        "SESSION": session,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=ROOT, env=env, check=True, timeout=60)
    (line,) = output.read_text().splitlines()
    name, _, value = line.partition("=")
    assert name == "cells"
    return json.loads(value)


def test_every_session_of_cells_has_a_workflow_calling_the_cells_workflow():
    # The lists noxfile.py parametrizes its sessions with (it loads the same module by path).
    assert SESSIONS == {"matrix": CELLS, "history": HISTORY_CELLS, "torch_history": TORCH_HISTORY_CELLS}
    assert set(CALLERS) == set(SESSIONS)
    for session, file in CALLERS.items():
        workflow = yaml.safe_load((WORKFLOWS / file).read_text())
        (job,) = workflow["jobs"].values()
        assert job["uses"] == "./.github/workflows/cells.yml"
        assert job["with"]["session"] == session
        assert "schedule" in workflow[True]  # PyYAML reads the key `on` as True
    assert CELLS_WORKFLOW["env"]["SESSION"] == "${{ inputs.session }}"


@pytest.mark.parametrize("session", list(SESSIONS))
def test_every_cell_of_the_session_is_a_job(tmp_path, session):
    printed = _cells_printed(tmp_path, session)
    assert printed == [{"name": c.name, "python": c.python} for c in SESSIONS[session]]
    jobs = CELLS_WORKFLOW["jobs"]
    assert jobs["cells"]["outputs"]["cells"] == "${{ steps.cells.outputs.cells }}"
    assert jobs["cell"]["strategy"]["matrix"]["cell"] == "${{ fromJSON(needs.cells.outputs.cells) }}"


def _nox_sessions() -> set[str]:
    """Every session of the cell lists as noxfile.py declares them (`nox -l --json`, the test env's nox)."""
    argv = [sys.executable, "-m", "nox", "-l", "--json", "-s", *SESSIONS]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True, timeout=120).stdout
    return {s["session"] for s in json.loads(out)}


def test_each_cell_job_runs_its_nox_session():
    steps = CELLS_WORKFLOW["jobs"]["cell"]["steps"]
    (run,) = [s["run"] for s in steps if s.get("run", "").startswith("nox -s")]
    assert run == 'nox -s "$SESSION(${{ matrix.cell.name }})"'
    listed = _nox_sessions()
    for session, cells in SESSIONS.items():
        missing = [c.name for c in cells if f"{session}({c.name})" not in listed]
        assert not missing, f"nox lists no session {session}(...) for cells {missing}"
    (setup,) = [s for s in steps if s.get("uses", "").startswith("actions/setup-python")]
    assert "${{ matrix.cell.python }}" in setup["with"]["python-version"]


def test_each_cell_uploads_its_store_and_job_status_whatever_happened():
    steps = CELLS_WORKFLOW["jobs"]["cell"]["steps"]
    # What `harness merge --expect-cells` reads of each artifact (harness.cli.commands.merge).
    (status,) = [s for s in steps if f"> reports/store/{JOB_STATUS_FILE}" in s.get("run", "")]
    assert status["if"] == "always()" and 'echo "${{ job.status }}"' in status["run"]
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["if"] == "always()"
    assert upload["with"] == {
        "name": ARTIFACT_PREFIX + "${{ matrix.cell.name }}",
        "path": "reports/store",
        "include-hidden-files": True,
        "overwrite": True,  # a cell job re-run (the same workflow run) replaces its store
    }
    assert steps.index(status) < steps.index(upload)
