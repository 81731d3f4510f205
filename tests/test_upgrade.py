"""harness.environments.upgrade, `python -m harness upgrade`, and the workflow users copy
(.github/workflows/upgrade-gate.yml)."""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from html import escape as html_escape
from pathlib import Path

import pytest
import yaml

from harness import gate
from harness.cli import build_parser, main
from harness.cli.commands import upgrade as upgrade_cmd
from harness.environments import envs, matrix, upgrade
from harness.gate import verdict
from tests import record_builders as rb
from tests.upgrade_fakes import RAGGED_ERROR
from tests.upgrade_fakes import fake_steps as _fake_steps
from tests.upgrade_fakes import real_runs as _real_runs

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
        pytest.param(["jax==0.9.2", "JAX==0.9.1"], "jax is given twice", id="twice"),
    ],
)
def test_bad_targets(specs: list[str], message: str) -> None:
    with pytest.raises(upgrade.UpgradeError, match=re.escape(message)):
        upgrade.targets(specs, DEFAULT)


def test_both_sides_run_the_same_plan() -> None:
    assert upgrade.targets(["jax==0.9.2", "torch==2.14.1"], DEFAULT) == {"jax": "0.9.2", "torch": "2.14.1"}
    # The baseline's own pin is the control, not an error: it must come out SAFE.
    assert upgrade.targets(["torch==2.13.0"], DEFAULT) == {"torch": "2.13.0"}
    budget = upgrade.Budget(kernels=("jax_xla",), examples=2, seed=7, bench=False)
    base, cand = (upgrade.steps(budget, ["jax_xla", "pallas_flash"], Path(side)) for side in ("b", "c"))
    strip = lambda plan: [[a for a in s.argv if a not in ("b", "c")] for s in plan]  # noqa: E731
    assert strip(base) == strip(cand)  # only the store differs
    # One run per kernel: a kernel that cannot run, or crashes its process, stops no other.
    compiles = ["compile"] + [f"compile #{i + 1}" for i in range(1, upgrade.COMPILE_ROUNDS)]
    assert [s.label for s in base] == ["run jax_xla", "run pallas_flash", *compiles]
    assert base[2].argv[:4] == ("compile", "--out", "b", "--repeat") and base[2].argv[4] == "1"
    assert base[0].argv[:7] == ("run", "--profile", "ci", "--seed", "7", "--examples", "2")
    assert base[1].argv[-2:] == ("--kernel", "pallas_flash")
    with pytest.raises(upgrade.UpgradeError, match="--examples=0 must be at least 1"):
        upgrade.Budget(examples=0)


def test_the_default_budget_is_each_kernels_smoke_set_and_drawn_cases() -> None:
    budget = upgrade.Budget()
    for kernel, n in matrix.EXAMPLES.items():
        # matrix.EXAMPLES holds each kernel's whole smoke set and a drawn case (tests/test_matrix.py).
        assert budget.examples_for(kernel) == n + upgrade.EXTRA_DRAWN
    assert upgrade.Budget(examples=3).examples_for("pallas_splash") == 3  # --examples overrides
    with pytest.raises(upgrade.UpgradeError, match="no default case budget: add it to"):
        budget.examples_for("my_module:KERNEL")
    (run,) = [s for s in upgrade.steps(budget, ["pallas_splash"], Path("s")) if s.name == "run"]
    assert run.argv[run.argv.index("--examples") + 1] == str(matrix.EXAMPLES["pallas_splash"] + 2)
    # A kernel only the environments register (tokamax, absent from the harness's own environment: the
    # default `nox -s upgrade` once stopped with "tokamax_xla has no default case budget") takes theirs.
    declared = upgrade.Budget(declared=(("tokamax_only", 5), ("pallas_splash", 1)))
    assert declared.examples_for("tokamax_only") == 5 + upgrade.EXTRA_DRAWN
    assert declared.examples_for("pallas_splash") == 1 + upgrade.EXTRA_DRAWN  # as the environment declares it


def test_compile_and_bench_rounds_alternate_between_the_sides_after_the_runs() -> None:
    budget = upgrade.Budget(examples=1, bench_rounds=2)
    plans = {side: upgrade.steps(budget, ["a", "b"], Path(side)) for side in ("baseline", "candidate")}
    order = [(side, s.label) for side, s in upgrade.schedule(plans)]
    compiles = ["compile"] + [f"compile #{i + 1}" for i in range(1, upgrade.COMPILE_ROUNDS)]
    assert order == [
        ("baseline", "run a"),
        ("baseline", "run b"),
        ("candidate", "run a"),
        ("candidate", "run b"),
        *((side, label) for label in compiles for side in ("baseline", "candidate")),
        ("baseline", "bench"),
        ("candidate", "bench"),
        ("baseline", "bench #2"),
        ("candidate", "bench #2"),
    ]


def test_run_steps_go_jobs_at_a_time_both_sides_of_a_kernel_together_and_compile_and_bench_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = upgrade.Budget(examples=1, bench_rounds=2)
    plans = {side: upgrade.steps(budget, ["a", "b"], tmp_path / side) for side in ("baseline", "candidate")}
    sides = {side: (None, tmp_path / side) for side in plans}
    # Two run steps must be in flight at once to pass the barrier (a serial run_all times out there).
    pair, active, seen = threading.Barrier(2, timeout=30), [], []
    lock = threading.Lock()

    def run_step(side, env, step, *, store, cwd, logs):  # noqa: ANN001, ANN202 - upgrade.run_step's
        with lock:
            active.append(step.label)
            seen.append((side, step.label, tuple(active)))
        if step.name == "run":
            pair.wait()
        with lock:
            active.remove(step.label)
        return upgrade.StepResult(side=side, step=step, code=0, seconds=0.0, log=tmp_path, command="x")

    monkeypatch.setattr(upgrade, "run_step", run_step)
    monkeypatch.setattr(upgrade, "cannot_compile", lambda env: None)  # both sides can compile: no env is built
    results = upgrade.run_all(sides, plans, cwd=tmp_path, logs=tmp_path, jobs=2, log=lambda line: None)
    # Returned in schedule order, whatever order they ran in.
    assert [(r.side, r.step.label) for r in results] == [(side, s.label) for side, s in upgrade.schedule(plans)]
    runs = [(side, label) for side, label, _ in seen if label.startswith("run")]
    assert sorted(runs[:2]) == [("baseline", "run a"), ("candidate", "run a")]  # one kernel's two sides together
    assert sorted(runs[2:]) == [("baseline", "run b"), ("candidate", "run b")]
    rest = [(side, label, at_once) for side, label, at_once in seen if not label.startswith("run")]
    alone = [(side, s.label) for side, s in upgrade.schedule(plans) if s.name != "run"]
    assert [(side, label) for side, label, _ in rest] == alone and len(alone) == 2 * (upgrade.COMPILE_ROUNDS + 2)
    assert all(at_once == (label,) for _, label, at_once in rest)  # nothing else ran beside them
    with pytest.raises(upgrade.UpgradeError, match="--jobs=0 must be at least 1"):
        upgrade.run_all(sides, plans, cwd=tmp_path, logs=tmp_path, jobs=0)


def test_a_run_step_claims_only_its_own_kernels_run_directory(tmp_path: Path) -> None:
    # Run steps of two kernels write into one side's store at once: each claims the run.json naming its kernel.
    for run_id, kernels in (("r1", ["a"]), ("r2", ["b"]), ("r3", ["a", "b"])):
        (tmp_path / "records" / run_id).mkdir(parents=True)
        (tmp_path / "records" / run_id / "run.json").write_text(json.dumps({"kernels": kernels}))
    (tmp_path / "records" / "r4").mkdir()  # a run.json not written yet
    assert upgrade._run_dirs(tmp_path, "a") == {"r1"} and upgrade._run_dirs(tmp_path, "b") == {"r2"}
    assert upgrade._run_dirs(tmp_path) == {"r1", "r2", "r3", "r4"}


def _result(step: upgrade.Step, side: str, code: int, tmp_path: Path, *, runs: tuple[str, ...] = ()):
    log = tmp_path / f"{side}-{step.label}.log"
    log.write_text(f"$ python -m harness {step.name}\nTraceback ...\nRuntimeError: boom in {side}\n")
    return upgrade.StepResult(side=side, step=step, code=code, seconds=1.0, log=log, command="x", runs=runs)


RUN_K = upgrade.Step(name="run", argv=(), kernel="k")
COMPILE = upgrade.Step(name="compile", argv=())


@pytest.mark.parametrize(
    ("b_code", "c_code", "status", "change", "fails"),
    [
        pytest.param(0, 3, "worse", "run: lost in the candidate", True, id="candidate-crashed"),
        pytest.param(3, 1, "not compared", "run: did not run in the baseline", False, id="baseline-crashed"),
        pytest.param(2, 3, "not compared", "run: did not run on either side", False, id="both"),
    ],
)
def test_a_step_that_did_not_run_is_one_finding_with_its_log(
    tmp_path: Path, b_code: int, c_code: int, status: str, change: str, fails: bool
) -> None:
    results = [
        _result(RUN_K, "baseline", b_code, tmp_path, runs=("b1",)),
        _result(COMPILE, "baseline", 0, tmp_path, runs=("b2",)),
        _result(RUN_K, "candidate", c_code, tmp_path, runs=("c1",)),
        _result(COMPILE, "candidate", 0, tmp_path, runs=("c2",)),
    ]
    (row,), drop = verdict.step_rows(results)
    assert (row.category, row.subject, row.status, row.change, row.fails) == ("correctness", "k", status, change, fails)
    assert drop == {"b1", "c1"}  # both sides' runs of that check: compared by neither, counted once
    crashed = [r for r in results if not r.ran]
    for r in crashed:
        why = f"the {r.side}'s run k did not run (exit {r.code}): RuntimeError: boom in {r.side}; log {r.log}"
        assert why in row.detail
    # Exit 4 (a kernel that cannot run here) and 1 (recorded failures) are results: the gate judges them.
    ran = [_result(RUN_K, side, code, tmp_path) for side, code in (("baseline", 4), ("candidate", 1))]
    assert verdict.step_rows(ran) == ([], set())


def _row(
    status: str, *, fails: bool = False, category: str = "speed", subject: str = "s", detail: str = ""
) -> gate.Row:
    return gate.Row(
        category=category,
        subject=subject,
        status=gate.Status(status),
        baseline="",
        candidate="",
        change=status,
        detail=detail,
        fails=fails,
    )


def _verdict(*rows: gate.Row) -> verdict.Verdict:
    result = gate.GateResult(baseline="b", candidate="c", thresholds="t", rows=list(rows))
    return verdict.verdict(change="jax 0.10.2 -> 0.9.2", result=result)


def test_the_verdict_separates_regressions_from_what_is_not_compared() -> None:
    ragged = _row("not compared", category="correctness", subject="ragged", detail="cannot run on either side: E")
    same = [_row("unchanged"), _row("unchanged", category="drift"), _row("unchanged")]
    safe = _verdict(ragged, _row("better", category="memory"), *same)
    assert (safe.safe, safe.code) == (True, 0)
    assert safe.headline == (
        "SAFE: jax 0.10.2 -> 0.9.2 (no regression; 1 improvement, 0 new, 1 not compared, 3 within noise)"
    )
    assert safe.groups[gate.Group.NOT_COMPARED] == ("correctness: ragged: not compared: cannot run on either side: E",)
    assert safe.groups[gate.Group.WITHIN_NOISE] == ("speed 2, drift 1",)
    assert safe.reasons == ()
    lost = _row("worse", fails=True, category="correctness", subject="k", detail="evidence")
    bad = _verdict(ragged, lost, _row("worse", fails=True), *same)
    assert (bad.safe, bad.code) == (False, 1)
    assert bad.headline == (
        "NOT SAFE: jax 0.10.2 -> 0.9.2 (2 regressions: correctness 1, speed 1; "
        "0 improvements, 0 new, 1 not compared, 3 within noise)"
    )
    assert bad.reasons == ("correctness: k: worse: evidence", "speed: s: worse")
    assert bad.lines()[:3] == [bad.headline, "  - correctness: k: worse: evidence", "  - speed: s: worse"]
    # Nothing compared at all (every kernel cannot run on either side): no verdict either way.
    none = _verdict(ragged)
    assert (none.safe, none.code, none.headline.split(":")[0]) == (False, 4, "CANNOT TELL")


def test_an_environment_that_cannot_be_built_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    # A real build with uv, against an index that has nothing: the failed requirement is named.
    empty = tmp_path / "wheels"
    empty.mkdir()
    argv = ["upgrade", "--to", "jax==0.9.2", "--no-index", "--find-links", str(empty), "--envs", str(tmp_path / "e")]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    jax = envs.pinned(DEFAULT)["jax"]
    assert "cannot build the baseline environment" in err and jax.split("==")[1] in err, err


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


def _job_runs(wf: dict) -> list[tuple[str, dict[str, str], str]]:
    """(job, its env, one `run:` script) in the jobs' order; a matrix job once per value, `${{ matrix.K }}` at it."""
    out = []
    for name, job in wf["jobs"].items():
        matrix = job.get("strategy", {}).get("matrix", {})
        for values in itertools.product(*matrix.values()):
            at = dict(zip(matrix, values, strict=True))
            env = {
                k: re.sub(r"\$\{\{ matrix\.(\w+) \}\}", lambda m, at=at: at[m.group(1)], v)
                for k, v in job.get("env", {}).items()
            }
            out += [(name, env, step["run"]) for step in job["steps"] if "run" in step]
    return out


def _nox_sessions() -> set[str]:
    """The sessions `nox -l` lists: functions of noxfile.py decorated with @nox.session."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    decorated = lambda f: any("nox.session" in ast.unparse(d) for d in f.decorator_list)  # noqa: E731
    return {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and decorated(f)}


def _workflow_calls(tmp_path: Path) -> list[tuple[str, list[str]]]:
    """Each `run:` step in bash with `nox` and `python` recording their arguments instead of running: (job, argv)."""
    wf = _workflow()
    stub = tmp_path / "bin"
    stub.mkdir()
    for name in ("nox", "python"):
        (stub / name).write_text(f'#!/bin/sh\nprintf "%s\\n" "{name}" "$@" > "$ARGV_DIR/{name}"\n')
        (stub / name).chmod(0o755)
    env = {**os.environ, **_env_defaults(wf), "PATH": f"{stub}:{os.environ['PATH']}", "ARGV_DIR": str(tmp_path)}
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    calls = []
    for job, job_env, script in _job_runs(wf):
        done = subprocess.run(
            ["bash", "-e", "-c", script], cwd=tmp_path, env={**env, **job_env}, capture_output=True, text=True
        )
        assert done.returncode == 0, (script, done.stderr)
        for name in ("nox", "python"):
            if (tmp_path / name).exists():
                calls.append((job, (tmp_path / name).read_text().splitlines()))
                (tmp_path / name).unlink()
    return calls


def test_the_workflows_side_and_gate_commands_are_options_the_cli_has(tmp_path: Path) -> None:
    """The side jobs (one per side, in parallel) and the gate job over what they upload, through the CLI parser."""
    wf = _workflow()
    calls = _workflow_calls(tmp_path)
    assert [argv[1:4] for _, argv in calls if argv[0] == "python"] == [["-m", "pip", "install"]] * 3  # per job run
    nox_calls = [(job, argv[1:]) for job, argv in calls if argv[0] == "nox"]
    parser, sessions = build_parser(), _nox_sessions()
    parsed = []
    for job, argv in nox_calls:
        assert argv[:3] == ["-s", "upgrade", "--"] and argv[1] in sessions, argv
        parsed.append((job, parser.parse_args(["upgrade", *argv[3:]])))  # raises (exit 2) on what the CLI rejects
    sides = [args for job, args in parsed if job == "side"]
    assert [a.side for a in sides] == list(upgrade.SIDES) and all(a.gate is None for a in sides)
    assert all(a.to == ["jax==0.9.2"] and a.examples is None and a.out == Path("reports/upgrade") for a in sides)
    (gate_args,) = [args for job, args in parsed if job == "gate"]
    # The gate reads the very directories the side jobs upload and the gate job downloads.
    assert gate_args.gate == [a.out / a.side for a in sides] and gate_args.side is None and gate_args.to == []
    side_job, gate_job = wf["jobs"]["side"], wf["jobs"]["gate"]
    (upload,) = [s for s in side_job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["with"]["path"] == "reports/upgrade/${{ matrix.side }}" and upload["if"] == "always()"
    downloads = [s["with"] for s in gate_job["steps"] if s.get("uses", "").startswith("actions/download-artifact")]
    assert [(d["name"], Path(d["path"])) for d in downloads] == [
        (upload["with"]["name"].replace("${{ matrix.side }}", s), gate_args.gate[i])
        for i, s in enumerate(upgrade.SIDES)
    ]
    assert (gate_job["needs"], gate_job["if"]) == ("side", "always()")  # a side that failed is named by the gate


@pytest.mark.slow
def test_workflow_runs_from_a_clean_clone(tmp_path: Path) -> None:
    """The workflow's `run:` commands, for real, in a clone of this commit, with a small budget (minutes): both
    side jobs, then the gate job, in one directory (where the gate job downloads the sides to)."""
    if shutil.which("nox") is None:
        pytest.skip("nox is not installed")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    wf = _workflow()
    env = {**os.environ, **_env_defaults(wf), "BUDGET": SMALL, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    env.pop("PIP_EXTRA_INDEX_URL")  # this machine's pip configuration already finds the CPU torch
    steps = [(job_env, s) for _, job_env, s in _job_runs(wf) if "pip install" not in s]  # nox is installed here
    codes = [
        subprocess.run(["bash", "-e", "-c", s], cwd=clone, env={**env, **job_env}).returncode for job_env, s in steps
    ]
    assert codes[:2] == [0, 0]  # each side written
    assert codes[2] in (0, 1)  # safe or not safe: both are verdicts, with the report written
    html = (clone / "reports" / "upgrade" / "index.html").read_text()
    verdict = "SAFE" if codes[2] == 0 else "NOT SAFE"
    jax_now = envs.pinned(DEFAULT)["jax"].split("==")[1]  # the baseline is the default environment
    assert f"<h1>{verdict}: jax {html_escape(jax_now + ' -> 0.9.2')}" in html
    assert verdict in (tmp_path / "summary.md").read_text()
    json.loads(next((clone / "reports" / "upgrade" / "candidate" / "records").glob("*/run.json")).read_text())


# --- end to end, with each side's steps faked by copies of real records ---


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Records written by the real run, compile and bench commands (tests.record_builders.WRITERS)."""
    return rb.real_store(tmp_path_factory)


def _upgrade(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["upgrade", "--to", "torch==2.13.0", "--out", str(tmp_path / "out"), *extra])
    out = capsys.readouterr().out
    html = (tmp_path / "out" / "index.html").read_text()
    return code, out, html


def test_the_control_an_upgrade_to_the_baselines_own_versions_is_safe(tmp_path, capsys, monkeypatch, real_store):
    calls = _fake_steps(monkeypatch, real_store)
    code, out, html = _upgrade(tmp_path, capsys)
    listed = f"  kernel ragged: registered on both sides, {upgrade.EXTRA_DRAWN} cases"
    first = out.splitlines()[out.splitlines().index(listed) + 1 :]
    verdict = next(line for line in first if line.startswith(("SAFE", "NOT SAFE", "CANNOT TELL")))
    assert code == 0, out
    assert verdict.startswith("SAFE: torch==2.13.0 (no version changed: the control) (no regression; 0 improvements")
    # Every step ran on both sides, though a kernel cannot run: run per kernel (both sides of a kernel side by
    # side, `--jobs` at a time: any order within a kernel), compile, bench rounds alternating.
    assert sorted(calls[:2]) == [("baseline", "run tests._fakes:CORRECT"), ("candidate", "run tests._fakes:CORRECT")]
    assert sorted(calls[2:4]) == [("baseline", "run ragged"), ("candidate", "run ragged")]
    rounds = [f"compile #{i + 1}" if i else "compile" for i in range(upgrade.COMPILE_ROUNDS)]
    rounds += [f"bench #{i + 1}" if i else "bench" for i in range(upgrade.BENCH_ROUNDS)]
    assert calls[4:] == [(side, r) for r in rounds for side in ("baseline", "candidate")]
    assert f"correctness: ragged: ran on neither side: cannot run on either side: {RAGGED_ERROR}" in out
    # The report says what the terminal said, and holds compile and bench records of both sides.
    assert f"<h1>{html_escape(verdict)}</h1>" in html
    for group in ("regressions", "improvements", "new", "not-compared", "within-noise"):
        assert f'id="verdict-{group}"' in html
    counts = re.search(r"(\d+) runs, (\d+) case records, (\d+) bench records, (\d+) compile records", html)
    assert counts and int(counts.group(3)) > 0 and int(counts.group(4)) > 0, counts
    real = _real_runs(real_store)
    n_compile = len(list(real["compile"].glob("compile-*.json")))
    n_bench = len([f for f in real["bench"].glob("*.json") if f.name != "run.json"])
    assert (int(counts.group(3)), int(counts.group(4))) == (
        2 * upgrade.BENCH_ROUNDS * n_bench,
        2 * upgrade.COMPILE_ROUNDS * n_compile,
    )
    # The same verdict for CI beside the report (harness.cli.results; tests/test_results.py reads them whole).
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["verdict"], summary["headline"], summary["failures"]) == ("SAFE", verdict, [])
    assert summary["kernels"] == {"tests._fakes:CORRECT": "both sides", "ragged": "both sides"}
    junit = (tmp_path / "out" / "junit.xml").read_text()
    assert 'name="ragged"' in junit and 'failures="0"' in junit.split("\n")[1]


def test_a_kernel_lost_in_the_candidate_is_the_one_regression_and_stops_nothing(
    tmp_path, capsys, monkeypatch, real_store
):
    calls = _fake_steps(monkeypatch, real_store, crash={("candidate", "run tests._fakes:CORRECT")})
    code, out, html = _upgrade(tmp_path, capsys)
    assert code == 1, out
    assert "NOT SAFE: torch==2.13.0 (no version changed: the control) (1 regression: correctness 1;" in out
    log = tmp_path / "out" / "candidate" / "logs" / "candidate-run-tests._fakes:CORRECT.log"
    assert (
        "  - correctness: tests._fakes:CORRECT: run: lost in the candidate: the candidate's run tests._fakes:CORRECT "
        f"did not run (exit 3): ImportError: cannot import name 'x' from 'jax'; log {log}"
    ) in out
    assert len(calls) == 4 + 2 * (upgrade.COMPILE_ROUNDS + upgrade.BENCH_ROUNDS)  # the crash stopped no other step
    assert "cannot import name" in html


def test_a_step_that_crashed_in_the_baseline_is_not_compared(tmp_path, capsys, monkeypatch, real_store):
    _fake_steps(monkeypatch, real_store, crash={("baseline", "compile")})
    code, out, _ = _upgrade(tmp_path, capsys)
    assert code == 0, out
    assert "compile: compile step: compile: did not run in the baseline: the baseline's compile did not run" in out


@pytest.mark.slow
def test_the_control_for_real_in_this_environment(tmp_path, capsys, monkeypatch) -> None:
    """The control with real steps: both sides are this interpreter, one kernel, one case each (a minute or two)."""

    def environments(args, changes):  # noqa: ANN001, ANN202
        spec = envs.EnvSpec(python=sys.executable, requirements=(), index=envs.IndexOptions(), label="this")
        return envs.Env(Path(sys.prefix), spec), envs.Env(Path(sys.prefix), spec)

    monkeypatch.setattr(upgrade_cmd, "_environments", environments)
    argv = ["--kernel", "jax_xla", "--kernel", "pallas_ragged_paged", "--examples", "1", "--no-compile", "--no-bench"]
    code, out, html = _upgrade(tmp_path, capsys, *argv)
    assert code == 0, out
    assert "SAFE: torch==2.13.0 (no version changed: the control) (no regression;" in out
    assert "<h1>SAFE: torch==2.13.0" in html


def test_a_side_never_inherits_this_environments_libtpu(monkeypatch) -> None:
    # jax sets TPU_LIBRARY_PATH to its own libtpu when it loads it: inherited, a side built without libtpu (jax[tpu]
    # 0.12.1 cannot install) compiled with this environment's, and a side with its own libtpu used this one instead.
    monkeypatch.setenv("TPU_LIBRARY_PATH", "/elsewhere/libtpu.so")
    spec = envs.EnvSpec(python=sys.executable, requirements=(), index=envs.IndexOptions())
    env = envs.Env(Path(sys.executable).parent.parent, spec)  # this interpreter, as a built environment
    seen = upgrade.query(env, "import json, os; print(json.dumps(os.environ.get('TPU_LIBRARY_PATH')))", cwd=ROOT)
    assert seen is None
    assert "TPU_LIBRARY_PATH" not in envs.side_env() and envs.side_env(X="1")["X"] == "1"


def test_a_candidate_without_libtpu_is_one_row_saying_why(tmp_path, capsys, monkeypatch, real_store) -> None:
    # jax[tpu]==0.12.1 pins a libtpu the index lacks: the candidate is built without the extra, so it cannot compile
    # for a TPU. One regression says so, with the resolver's words, instead of a "new compile failure" per job.
    calls = _fake_steps(monkeypatch, real_store)
    why = "Because only libtpu<=0.0.52 is available and jax[tpu]>=0.12.1 depends on libtpu==0.0.53.*"
    sides = []
    for name, installed, left in (("base", {"libtpu": "0.0.52"}, {}), ("cand", {}, {"the [tpu] extra": why})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "installed.json").write_text(json.dumps(installed))
        (tmp_path / name / envs.LEFT_OUT).write_text(json.dumps(left))
        spec = envs.EnvSpec(python="python", requirements=(), index=envs.IndexOptions())
        sides.append(envs.Env(tmp_path / name, spec))
    monkeypatch.setattr(upgrade_cmd, "_environments", lambda args, changes: tuple(sides))
    query = upgrade.query
    monkeypatch.setattr(
        upgrade, "query", lambda env, code, *, cwd: query(envs.Env(Path("base"), env.spec), code, cwd=cwd)
    )
    code, out, _ = _upgrade(tmp_path, capsys, "--no-bench")
    assert code == 1, out
    assert not [c for c in calls if c == ("candidate", "compile")]  # never started
    lost = [ln for ln in out.splitlines() if ln.startswith("  - compile")]
    assert len(lost) == 1 and "compile: lost in the candidate" in lost[0], lost
    assert "built without libtpu (the [tpu] extra cannot install: Because only libtpu<=0.0.52" in lost[0]
