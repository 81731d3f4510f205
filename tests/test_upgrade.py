"""harness.environments.upgrade, `python -m harness upgrade`, and the workflow users copy
(.github/workflows/upgrade-gate.yml)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.cli import build_parser, main
from harness.environments import upgrade

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "upgrade-gate.yml"
DEFAULT = (ROOT / "constraints" / "default.txt").read_text()
# The budget the slow test gives the workflow: one kernel, one case, one compile shape, no benchmarks.
SMALL = "--examples 1 --kernel jax_xla --compile-shape mha_f32_256 --no-bench"


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        pytest.param([], "give at least one --to NAME==VERSION", id="none"),
        pytest.param(["jax>=0.9"], "expected NAME==VERSION", id="not-a-pin"),
        pytest.param(["jaxx==1.0"], "jaxx is not pinned in the constraints", id="unknown"),
        pytest.param(["jax==0.10.2"], "the baseline already pins jax==0.10.2", id="same"),
        pytest.param(["jax==0.9.2", "JAX==0.9.1"], "jax is given twice", id="twice"),
    ],
)
def test_bad_targets(specs: list[str], message: str) -> None:
    with pytest.raises(upgrade.UpgradeError, match=re.escape(message)):
        upgrade.targets(specs, DEFAULT)


def test_both_sides_run_the_same_plan() -> None:
    assert upgrade.targets(["jax==0.9.2", "torch==2.14.1"], DEFAULT) == {"jax": "0.9.2", "torch": "2.14.1"}
    budget = upgrade.Budget(kernels=("jax_xla",), examples=2, seed=7, bench=False)
    base, cand = (upgrade.steps(budget, ["jax_xla"], Path(side)) for side in ("b", "c"))
    strip = lambda plan: [[a for a in s.argv if a not in ("b", "c")] for s in plan]  # noqa: E731
    assert strip(base) == strip(cand)  # only the store differs
    assert [s.name for s in base] == ["run", "compile"]
    assert base[0].argv[:7] == ("run", "--profile", "ci", "--seed", "7", "--examples", "2")
    with pytest.raises(upgrade.UpgradeError, match="--examples=0 must be at least 1"):
        upgrade.Budget(examples=0)


def test_verdict_names_what_and_why(tmp_path: Path) -> None:
    ok = upgrade.StepResult(side="baseline", name="run", code=1, seconds=1.0, log=tmp_path / "a", command="x")
    crashed = upgrade.StepResult(side="candidate", name="run", code=3, seconds=1.0, log=tmp_path / "b", command="x")
    safe = upgrade.verdict(
        change="jax 0.10.2 -> 0.9.2", gate_failed=False, gate_reasons=[], steps=[ok], only_baseline=[]
    )
    assert safe.safe and safe.headline.startswith("SAFE: jax 0.10.2 -> 0.9.2")
    bad = upgrade.verdict(
        change="jax 0.10.2 -> 0.9.2",
        gate_failed=False,
        gate_reasons=[],
        steps=[ok, crashed],
        only_baseline=["pallas_gpu"],
    )
    assert not bad.safe and bad.headline == "NOT SAFE: jax 0.10.2 -> 0.9.2 (2 findings)"
    assert bad.reasons == (
        f"candidate run did not run (exit 3): see {tmp_path / 'b'}",
        "kernel pallas_gpu is registered in the baseline and not in the candidate",
    )


def test_an_environment_that_cannot_be_built_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    # A real build with uv, against an index that has nothing: the failed requirement is named.
    empty = tmp_path / "wheels"
    empty.mkdir()
    argv = ["upgrade", "--to", "jax==0.9.2", "--no-index", "--find-links", str(empty), "--envs", str(tmp_path / "e")]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cannot build the baseline environment" in err and "jax==0.10.2" in err, err


# --- the workflow ---


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _env_defaults(wf: dict) -> dict[str, str]:
    """The workflow's env, each `${{ a || b || 'default' }}` taken at its default (what a scheduled run gets)."""
    out = {}
    for key, value in wf["env"].items():
        m = re.fullmatch(r"\$\{\{.*'([^']*)' \}\}", str(value))
        out[key] = m.group(1) if m else str(value)
    return out


def _run_steps(wf: dict) -> list[str]:
    return [step["run"] for job in wf["jobs"].values() for step in job["steps"] if "run" in step]


def _nox_sessions() -> set[str]:
    """The sessions `nox -l` lists: functions of noxfile.py decorated with @nox.session."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    decorated = lambda f: any("nox.session" in ast.unparse(d) for d in f.decorator_list)  # noqa: E731
    return {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and decorated(f)}


def test_workflow_commands_parse_and_name_real_sessions(tmp_path: Path) -> None:
    """Each `run:` step runs in bash with `nox` and `python` recording their arguments instead of running."""
    wf = _workflow()
    stub = tmp_path / "bin"
    stub.mkdir()
    for name in ("nox", "python"):
        (stub / name).write_text(f'#!/bin/sh\nprintf "%s\\n" "{name}" "$@" > "$ARGV_DIR/$$.{name}"\n')
        (stub / name).chmod(0o755)
    env = {**os.environ, **_env_defaults(wf), "PATH": f"{stub}:{os.environ['PATH']}", "ARGV_DIR": str(tmp_path)}
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    calls = []
    for script in _run_steps(wf):
        done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, (script, done.stderr)
    for path in sorted(tmp_path.glob("*.nox")) + sorted(tmp_path.glob("*.python")):
        calls.append(path.read_text().splitlines())
    nox_calls = [c[1:] for c in calls if c[0] == "nox"]
    assert nox_calls, "the workflow runs no nox session"
    sessions = _nox_sessions()
    parser = build_parser()
    for argv in nox_calls:
        assert argv[0] == "-s" and argv[1] in sessions, argv
        assert argv[1] == "upgrade" and argv[2] == "--"
        args = parser.parse_args(["upgrade", *argv[3:]])  # raises (exit 2) on anything the harness rejects
        assert args.to == ["jax==0.9.2"] and args.examples == 3 and args.out == Path("reports/upgrade")
    assert [c[1:4] for c in calls if c[0] == "python"] == [["-m", "pip", "install"]]


@pytest.mark.slow
def test_workflow_runs_from_a_clean_clone(tmp_path: Path) -> None:
    """The workflow's `run:` commands, for real, in a clone of this commit, with a small budget (minutes)."""
    if shutil.which("nox") is None:
        pytest.skip("nox is not installed")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    wf = _workflow()
    env = {**os.environ, **_env_defaults(wf), "BUDGET": SMALL, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    env.pop("PIP_EXTRA_INDEX_URL")  # this machine's pip configuration already finds the CPU torch
    steps = [s for s in _run_steps(wf) if "pip install" not in s]  # nox is installed here already
    codes = [subprocess.run(["bash", "-e", "-c", s], cwd=clone, env=env).returncode for s in steps]
    assert codes[0] in (0, 1)  # safe or not safe: both are verdicts, with the report written
    html = (clone / "reports" / "upgrade" / "index.html").read_text()
    verdict = "SAFE" if codes[0] == 0 else "NOT SAFE"
    assert f"<h1>{verdict}: jax 0.10.2 -&gt; 0.9.2" in html or f"<h1>{verdict}: jax 0.10.2 -> 0.9.2" in html
    assert verdict in (tmp_path / "summary.md").read_text()
    json.loads(next((clone / "reports" / "upgrade" / "candidate" / "records").glob("*/run.json")).read_text())
