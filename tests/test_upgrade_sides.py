"""`upgrade --side` and `upgrade --gate`: an upgrade's two sides as separate jobs, gated as the one-process upgrade
gates them (harness.environments.upgrade.SideRecord, harness.gate.machines). The sides' steps are faked over real
records (tests.upgrade_fakes); the gate, verdict, report and results run for real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.commands import upgrade as upgrade_cmd
from harness.environments import envs, upgrade
from harness.gate import Status, machines
from harness.gate.thresholds import load
from tests import record_builders as rb
from tests.upgrade_fakes import fake_steps

TO = ("--to", "torch==2.13.0")
VERDICTS = ("SAFE", "NOT SAFE", "CANNOT TELL")


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rb.real_store(tmp_path_factory)


def _fake_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """One side's environment, as tests.upgrade_fakes names both sides' (its queries tell them apart by path)."""
    spec = envs.EnvSpec(python="python", requirements=(), index=envs.IndexOptions())

    def build(args, changes, side, *, after=None):  # noqa: ANN001, ANN202 - upgrade_cmd._build's
        return envs.Env(Path("base" if side == "baseline" else "cand"), spec)

    monkeypatch.setattr(upgrade_cmd, "_build", build)


def _sides(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for side in upgrade.SIDES:
        assert main(["upgrade", *TO, "--side", side, "--out", str(out)]) == 0, capsys.readouterr().out
    capsys.readouterr()


def _gate(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["upgrade", "--gate", str(out / "baseline"), str(out / "candidate"), "--out", str(out)])
    return code, capsys.readouterr().out


def _shown(out: str) -> list[str]:
    """What the gate prints: the plan's kernel lines, then from the verdict to the results for CI."""
    lines = out.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith(VERDICTS))
    last = next(i for i, ln in enumerate(lines) if ln.startswith("results for CI"))
    return [ln for ln in lines if ln.startswith(("upgrade: ", "  kernel "))] + lines[first : last + 1]


@pytest.mark.parametrize(
    ("crash", "code"),
    [
        pytest.param(frozenset(), 0, id="control"),
        pytest.param({("candidate", "run tests._fakes:CORRECT")}, 1, id="lost-in-the-candidate"),
        pytest.param({("baseline", "compile")}, 0, id="crashed-in-the-baseline"),
    ],
)
def test_two_sides_then_the_gate_give_the_one_process_verdict(tmp_path, capsys, monkeypatch, real_store, crash, code):
    calls = fake_steps(monkeypatch, real_store, crash=crash)
    _fake_builds(monkeypatch)
    one, apart = tmp_path / "one", tmp_path / "apart"
    assert main(["upgrade", *TO, "--out", str(one)]) == code
    together = capsys.readouterr().out.replace(str(one), str(apart))
    ran_together = sorted(calls)
    _sides(apart, capsys)
    assert sorted(calls[len(ran_together) :]) == ran_together  # the same steps, each side in its own job
    gated, shown = _gate(apart, capsys)
    assert gated == code, shown
    assert _shown(shown) == _shown(together)
    summaries = [json.loads((d / upgrade_cmd.SUMMARY_NAME).read_text()) for d in (one, apart)]
    assert json.dumps(summaries[0]).replace(str(one), str(apart)) == json.dumps(summaries[1])
    junits = [(d / upgrade_cmd.JUNIT_NAME).read_text().replace(str(d), "OUT") for d in (one, apart)]
    assert junits[0] == junits[1]


def test_timings_from_two_machines_are_not_compared_and_correctness_still_gates(
    tmp_path, capsys, monkeypatch, real_store
):
    fake_steps(monkeypatch, real_store, crash={("candidate", "run tests._fakes:CORRECT")})
    _fake_builds(monkeypatch)
    _sides(tmp_path, capsys)
    dirs = {side: tmp_path / side for side in upgrade.SIDES}
    result, _ = upgrade_cmd._judge(dirs, load(None), set())
    timed = [r for r in result.rows if r.category in machines.TIMED]
    assert timed and not [r for r in timed if r.change == machines.CHANGE]  # one machine: compared
    for run_json in (dirs["candidate"] / "records").glob("*/run.json"):
        doc = json.loads(run_json.read_text())
        doc["machine"]["host"] = "another-runner"
        run_json.write_text(json.dumps(doc))
    result, _ = upgrade_cmd._judge(dirs, load(None), set())
    timed = [r for r in result.rows if r.category in machines.TIMED]
    assert timed and all((r.status, r.change, r.fails) == (Status.NOT_COMPARED, machines.CHANGE, False) for r in timed)
    assert "the candidate on another-runner: timings from two machines are never compared" in timed[0].detail
    assert [r for r in result.rows if r.category == "memory"]  # compiled memory does not depend on the machine
    code, out = _gate(tmp_path, capsys)
    assert code == 1, out  # the kernel lost in the candidate still gates
    assert "  - correctness: tests._fakes:CORRECT: run: lost in the candidate" in out
    assert machines.CHANGE in out


def _side_dir(root: Path, side: str, *, to: str = "2.13.0", schema: int | None = None) -> Path:
    """A side directory with its side file and no records."""
    d = root / side
    budget = upgrade.Budget().to_json()
    upgrade.SideRecord(side=side, to={"torch": to}, budget=budget, kernels={}, versions={}, steps=()).write(d)
    if schema is not None:
        doc = json.loads((d / upgrade.SIDE_FILE).read_text())
        (d / upgrade.SIDE_FILE).write_text(json.dumps({**doc, "schema": schema}))
    return d


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(lambda t: (t / "b", t / "c"), "holds no upgrade-side.json: give the --out/<side>", id="absent"),
        pytest.param(
            lambda t: (_side_dir(t, "candidate"), _side_dir(t, "baseline")),
            "is the candidate side; give the baseline's directory first",
            id="swapped",
        ),
        pytest.param(
            lambda t: (_side_dir(t, "baseline"), _side_dir(t, "candidate", to="2.14.1")),
            "the sides ran with different to",
            id="other-pins",
        ),
        pytest.param(
            lambda t: (_side_dir(t, "baseline", schema=2), _side_dir(t, "candidate")),
            "schema=2, this harness reads schema 1: run that side again",
            id="newer-schema",
        ),
    ],
)
def test_a_gate_over_sides_it_cannot_pair_is_one_line_exit_2(tmp_path, capsys, setup, message) -> None:
    (tmp_path / "b").mkdir()
    base, cand = setup(tmp_path)
    assert main(["upgrade", "--gate", str(base), str(cand), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["upgrade", "--out", "x"], "give at least one --to NAME==VERSION", id="no-to"),
        pytest.param(["upgrade", *TO, "--gate", "b", "c"], "--gate reads the --to pins from the side", id="gate-to"),
    ],
)
def test_bad_usage_of_sides_is_one_line_exit_2(tmp_path, capsys, monkeypatch, argv, message) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_a_side_file_round_trips_and_its_logs_move_with_its_directory(tmp_path: Path) -> None:
    d = tmp_path / "job" / "candidate"
    (d / "logs").mkdir(parents=True)
    step = upgrade.Step(name="run", argv=("run", "--kernel", "k"), kernel="k")
    done = upgrade.StepResult(
        side="candidate", step=step, code=3, seconds=1.5, log=d / "logs" / "x.log", command="c", runs=("r1",)
    )
    (d / "logs" / "x.log").write_text("$ python -m harness run\nImportError: boom\n")
    written = upgrade.SideRecord(
        side="candidate",
        to={"jax": "0.9.2"},
        budget=upgrade.Budget(kernels=("k",)).to_json(),
        kernels={"k": 3},
        versions={"jax": "0.9.2"},
        steps=(done,),
    )
    written.write(d)
    assert json.loads((d / upgrade.SIDE_FILE).read_text())["steps"][0]["log"] == "logs/x.log"
    assert upgrade.SideRecord.read(d) == written
    # Downloaded elsewhere (the gate job's artifact): the log is read where the directory now is.
    moved = shutil.copytree(d, tmp_path / "gate" / "candidate")
    (again,) = upgrade.SideRecord.read(moved).steps
    assert again.log == moved / "logs" / "x.log" and again.last_line() == "ImportError: boom"
    budget = upgrade.Budget.from_json(written.budget, declared=written.kernels)
    assert budget == upgrade.Budget(kernels=("k",), declared=(("k", 3),))
