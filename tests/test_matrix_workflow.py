"""The matrix workflow (.github/workflows/matrix.yml) has a job per cell of harness/environments/matrix.py.

Its first job prints the cells as a JSON list, and the cell job's matrix is that list: this runs the first job's
script as the workflow does and checks every cell of the module comes out, each run as its nox session.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from harness.environments.matrix import CELLS

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "matrix.yml").read_text())


def _cells_printed(tmp_path: Path) -> list[dict[str, str]]:
    """The cells job's output, as its script writes it to $GITHUB_OUTPUT (`python` is this interpreter)."""
    (step,) = [s for s in WORKFLOW["jobs"]["cells"]["steps"] if s.get("id") == "cells"]
    output = tmp_path / "github_output"
    env = {
        **os.environ,
        "GITHUB_OUTPUT": str(output),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=ROOT, env=env, check=True, timeout=60)
    (line,) = output.read_text().splitlines()
    name, _, value = line.partition("=")
    assert name == "cells"
    return json.loads(value)


def test_every_cell_of_the_matrix_module_is_a_job(tmp_path):
    printed = _cells_printed(tmp_path)
    assert printed == [{"name": c.name, "python": c.python} for c in CELLS]
    jobs = WORKFLOW["jobs"]
    assert jobs["cells"]["outputs"]["cells"] == "${{ steps.cells.outputs.cells }}"
    assert jobs["cell"]["strategy"]["matrix"]["cell"] == "${{ fromJSON(needs.cells.outputs.cells) }}"


def test_each_cell_job_runs_its_nox_session():
    steps = WORKFLOW["jobs"]["cell"]["steps"]
    assert any(s.get("run") == 'nox -s "matrix(${{ matrix.cell.name }})"' for s in steps)
    # The session's ids are the cells' names (noxfile.py: nox -s "matrix(py3.13-jax0.12.1-torch2.15.0)").
    noxfile = (ROOT / "noxfile.py").read_text()
    assert "nox.param(interpreter(c.python), c, id=c.name) for c in MATRIX.CELLS]" in noxfile
    (setup,) = [s for s in steps if s.get("uses", "").startswith("actions/setup-python")]
    assert "${{ matrix.cell.python }}" in setup["with"]["python-version"]
