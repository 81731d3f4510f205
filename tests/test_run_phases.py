"""benchmarks/run_phases.py's summaries, harness.runtime.phases' accounting and the docs table of its record."""

from __future__ import annotations

import json
import time

import pytest

from benchmarks import run_phases
from docs import generate
from harness.runtime import phases


def _doc(role: str, phases_cpu: dict[str, float], *, unphased: float = 0.0, requests: int = 0, hits: int = 0) -> dict:
    return {
        "role": role,
        "phases": {k: {"cpu_s": v, "calls": 1} for k, v in phases_cpu.items()},
        "unphased_cpu_s": unphased,
        "compile_requests": requests,
        "cache_hits": hits,
    }


def test_merge_phases_sums_processes_by_where_they_ran():
    docs = [
        _doc("run", {"draw": 1.0, "references compile": 2.0}, unphased=0.5),
        _doc("kernel-calls", {"kernel calls compile": 3.0}),
        _doc("kernel-calls", {"kernel calls compile": 1.5, "inputs": 0.25}),  # a fresh worker after a kill
    ]
    merged = run_phases.merge_phases(docs)
    assert merged["run: draw"] == {"cpu_s": 1.0, "calls": 1}
    assert merged["run: unphased"] == {"cpu_s": 0.5, "calls": 0}
    assert merged["worker kernel-calls: kernel calls compile"] == {"cpu_s": 4.5, "calls": 2}
    assert merged["worker kernel-calls: inputs"]["cpu_s"] == 0.25


def test_compile_counts_keep_the_run_apart_from_its_workers():
    docs = [
        _doc("run", {}, requests=5, hits=1),
        {**_doc("kernel-calls", {}, requests=40, hits=38), "compile_wall_s": {"trace": 1.25, "backend": 0.5}},
        _doc("probes", {}, requests=2),
    ]
    assert run_phases.compile_counts(docs) == {
        "run_cache_hits": 1,
        "run_compile_requests": 5,
        "workers_cache_hits": 38,
        "workers_compile_requests": 42,
        "workers_wall_s_backend": 0.5,
        "workers_wall_s_trace": 1.25,
    }


@pytest.mark.parametrize(
    ("warm", "cold", "programs", "met"),
    [
        pytest.param(100.0, 120.0, 45, (True, True, True), id="all-met"),
        pytest.param(150.0, 300.0, 45, (True, False, False), id="warm-over-and-cold-ratio-over"),
        pytest.param(100.0, 131.0, 39, (False, True, False), id="too-few-programs-and-ratio-1.31"),
    ],
)
def test_goal_names_each_figure_and_whether_it_is_met(warm, cold, programs, met):
    sides = {"cold": {"cpu_s": cold, "programs": programs}, "warm": {"cpu_s": warm, "programs": programs}}
    got = run_phases.goal(sides)
    assert (got["programs_met"], got["warm_met"], got["cold_met"]) == met
    assert got["warm_over_goal_s"] == round(warm - run_phases.GOAL_WARM_CPU_S, 1)
    assert got["cold_over_warm"] == round(cold / warm, 3)


def test_goal_says_whether_the_runs_came_to_the_same_verdicts():
    same = {"pallas_flash passed": 60}
    sides = {"cold": {"cpu_s": 1.0, "verdicts": same}, "warm": {"cpu_s": 1.0, "verdicts": dict(same)}}
    assert run_phases.goal(sides)["same_verdicts"] is True
    sides["warm"]["verdicts"] = {"pallas_flash passed": 59, "pallas_flash failed": 1}
    assert run_phases.goal(sides)["same_verdicts"] is False


@pytest.mark.parametrize(("failing", "met"), [(200.0, True), (200.75, False)])
def test_a_failure_may_add_at_most_the_cost_of_the_run_without_it(failing, met):
    passed = {"pallas_flash passed": 60}
    sides = {
        "warm": {"cpu_s": 100.25, "verdicts": passed},
        "failing": {"cpu_s": failing, "verdicts": {"fwd_causal_off_by_one failed": 3}},
    }
    got = run_phases.goal(sides)
    assert got["failing_met"] is met and got["failing_over_warm"] == round(failing / 100.25, 3)
    assert got["same_verdicts"] is True  # a planted bug's verdicts are its own, never compared with upstream's


def test_the_failing_side_runs_its_drop_in_once_unmeasured_first():
    assert run_phases.RUNS["failing"] == ("failing, first", "failing")
    assert set(run_phases.RUNS) == set(run_phases.SIDES)


def test_goal_without_a_warm_run_says_nothing_of_it():
    got = run_phases.goal({"cold": {"cpu_s": 200.0, "programs": 41}})
    assert got["programs"] == 41 and got["warm_met"] is None and got["cold_met"] is None


def test_the_compile_floor_is_what_the_cold_runs_compile_phases_cost_beyond_the_warm_runs():
    def side(cpu_s, **phases):
        return {"cpu_s": cpu_s, "programs": 41, "phases": {k: {"cpu_s": v, "calls": 1} for k, v in phases.items()}}

    compile_phase, other = "worker kernel-calls: kernel calls compile", "run: draw"
    cold = side(200.0, **{compile_phase: 90.0, "run: references compile": 30.0, other: 20.0})
    # A compile phase the warm run spent more in counts nothing (never a negative floor); other phases never count.
    warm = side(80.0, **{compile_phase: 30.0, "run: references compile": 35.0, other: 5.0})
    got = run_phases.goal({"cold": cold, "warm": warm})
    assert got["compile_floor_cpu_s"] == 60.0
    assert got["cold_over_floor"] == round(200.0 / 140.0, 3)
    assert run_phases.goal({"cold": cold})["compile_floor_cpu_s"] is None


def test_verdict_counts_per_implementation():
    records = [
        {"implementation": "pallas_flash", "passed": True},
        {"implementation": "pallas_flash", "passed": False},
        {"implementation": "torch_sdpa", "passed": True},
    ]
    assert run_phases.verdict_counts(records) == {
        "pallas_flash failed": 1,
        "pallas_flash passed": 1,
        "torch_sdpa passed": 1,
    }


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_nested_phase_is_counted_once_and_a_compile_request_names_its_phase():
    timer = phases.Timer("run")
    with timer.phase("outer"):
        _spin(0.05)
        with timer.phase("inner"):
            timer.on_event(phases.COMPILE_EVENT, 0.1, fun_name="f")
            _spin(0.05)
    assert set(timer.cpu) == {phases.STARTUP, "outer", "inner compile"}  # the compile was inner's alone
    assert 0.04 < timer.cpu["inner compile"] < 0.5 and 0.04 < timer.cpu["outer"] < 0.5
    assert timer.compile_requests == 1 and timer.cache_hits == 0 and timer.compile_wall == {"backend": 0.1}


def test_a_scope_names_the_phases_inside_it_and_the_workers_they_start():
    timer = phases.Timer("run")
    with timer.scope("probes"):
        with timer.scope("probes"):  # a scope inside itself is named once
            with timer.phase("kernel calls"):
                assert timer.innermost() == "probes: kernel calls"
    assert {"probes: kernel calls", "probes: probes", "probes"} == set(timer.cpu) - {phases.STARTUP}


def test_no_timer_without_the_environment_variable(monkeypatch):
    monkeypatch.delenv(phases.PHASES_ENV, raising=False)
    monkeypatch.setattr(phases, "_timer", None)
    assert phases.start("run") is None and phases.child_env() == {}
    with phases.phase("anything"):
        pass
    assert phases.timed("x", lambda a: a + 1)(1) == 2


@pytest.mark.parametrize(
    ("role", "file"), [("kernel-calls", "kernel-calls"), ("probes/kernel-calls", "probes+kernel-calls")]
)
def test_the_timer_writes_its_phases_to_the_directory(tmp_path, role, file):
    timer = phases.Timer(role)
    with timer.phase("inputs"):
        pass
    timer.write(str(tmp_path))
    (path,) = tmp_path.glob(f"phases-{file}-*.json")
    doc = json.loads(path.read_text())
    assert doc["role"] == role and doc["phases"]["inputs"]["calls"] == 1 and doc["cpu_s"] >= doc["unphased_cpu_s"]


def test_the_docs_table_shows_each_run_and_sums_the_small_phases(tmp_path):
    run = {
        "exit_code": 0,
        "cases": 60,
        "programs": 44,
        "cpu_s": 100.0,
        "phased_cpu_s": 97.5,
        "wall_s": 90.0,
        "verdicts": {"pallas_flash passed": 60},
        "compiles": {"workers_compile_requests": 50, "workers_cache_hits": 48, "workers_wall_s_trace": 12.0},
        "phases": {"run: draw": {"cpu_s": 20.0, "calls": 2}, "run: records": {"cpu_s": 0.1, "calls": 60}},
    }
    record = {
        "command": ["python", "-m", "harness", "run"],
        "commit": "abc1234",
        "host": {"cores": 2, "python": "3.13.0"},
        "versions": {"jax": "0.12.1", "torch": "2.15.0"},
        "time": "2026-12-07T15:00:00Z",
        "runs": {"cold": {**run, "cpu_s": 125.0, "phased_cpu_s": 120.0}, "warm": run},
        "goal": run_phases.goal({"cold": {"cpu_s": 125.0, "programs": 44}, "warm": run}),
    }
    path = tmp_path / "run_phases.json"
    path.write_text(json.dumps(record))
    table = generate.run_phases(path)
    assert "| warm | 0 | 60 | 44 | 100.0 | 90 | 50 | 48 | pallas_flash passed 60 |" in table
    assert "| run: draw | 20.0 | 20.0 |" in table
    assert "| 1 smaller phases | 0.1 | 0.1 |" in table
    assert "| after the phases: process exits, processes that wrote none | 5.0 | 2.5 |" in table
    assert "| warm: workers | 12.0 | 0.0 | 0.0 | 0.0 |" in table
    assert "x1.25" in table
