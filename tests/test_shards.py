"""`run --shard I/N` and `run --jobs N` (harness.running.jobs)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.running.jobs.processes import worst
from harness.running.jobs.shard import Shard
from harness.running.jobs.summaries import merge_rows
from harness.store.failures import FailureRecord
from harness.store.records import CaseRecord, RunRecord
from tests import _fakes

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("3", "must be I/N", id="no-slash"),
        pytest.param("a/2", "must be I/N", id="not-a-number"),
        pytest.param("2/2", "0 <= I < N", id="index-past-count"),
        pytest.param("0/0", "0 <= I < N", id="no-shards"),
    ],
)
def test_a_bad_shard_says_how_to_write_one(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Shard.parse(text)


def test_each_case_belongs_to_one_shard_and_shards_split_the_examples() -> None:
    shards = [Shard(i, 3) for i in range(3)]
    assert [s.examples(10) for s in shards] == [4, 3, 3] and Shard(0, 1).examples(10) == 10
    cases = [_fakes.small_case(seed=s, q_len=n, head_dim=d) for s in range(3) for n in (16, 32) for d in (32, 64)]
    owners = [[s.index for s in shards if s.owns(c)] for c in cases]
    assert all(len(o) == 1 for o in owners) and {o[0] for o in owners} == {0, 1, 2}
    assert all(Shard(0, 1).owns(c) for c in cases)


def test_a_shard_owns_whole_programs() -> None:
    # Cases that differ only in what a compiled program takes as data (seed, regime) go to one
    # shard: no two workers compile the same program.
    shards = [Shard(i, 2) for i in range(2)]
    programs = [_fakes.small_case(head_dim=d, kv_len=n) for d in (32, 64) for n in (16, 32)]
    owners = {p: [s.index for s in shards if s.owns(p)] for p in programs}
    for p in programs:
        for seed, regime in [(1, "ties"), (7, "large"), (99, "normal")]:
            assert [s.index for s in shards if s.owns(p.replace(seed=seed, regime=regime))] == owners[p]
    assert {o[0] for o in owners.values()} == {0, 1}


def test_the_most_serious_exit_status_wins() -> None:
    assert worst([0, 0]) == 0
    assert worst([0, 4]) == 4
    assert worst([4, 1, 0]) == 1
    assert worst([1, 2]) == 2
    assert worst([3, 1]) == 3
    assert worst([0, -9]) == 3  # a worker killed by a signal is the harness's failure


def test_merged_rows_sum_counts_and_keep_the_worst() -> None:
    a = {"kernel": "k", "examples": 3, "failed": 0, "worst": 0.2, "seconds": 10.0, "status": "PASS"}
    b = {"kernel": "k", "examples": 2, "failed": 1, "worst": None, "seconds": 12.0, "status": "FAIL"}
    (row,) = merge_rows([RunRecord(run_id="r0", more={"summary": [a]}), RunRecord(run_id="r1", more={"summary": [b]})])
    assert row.to_json() == a | {"examples": 5, "failed": 1, "worst": 0.2, "seconds": 12.0, "status": "FAIL"}


def test_two_shards_are_disjoint_and_the_same_every_time(tmp_path) -> None:
    # In this process (--in-process): which shard owns a case is decided before any kernel runs, wherever it runs.
    argv = ["run", "--kernel", "tests._fakes:CORRECT", "--oracle", "jax_reference", "--examples", "6"]
    argv += ["--profile", "ci", "--in-process"]
    seen = []
    for i in (0, 1, 0):
        out = tmp_path / f"s{len(seen)}"
        assert cli.main([*argv, "--shard", f"{i}/2", "--jobs", "1", "--out", str(out)]) == 0
        (run,) = out.glob("records/*/run.json")
        meta = json.loads(run.read_text())
        assert meta["shard"] == f"{i}/2" and meta["summary"][0]["examples"] == 3, meta["summary"]
        seen.append({p.name.split("--")[0] for p in run.parent.glob("*--tests._fakes_CORRECT.json")})
    assert seen[0] == seen[2] and not seen[0] & seen[1]


def test_jobs_runs_workers_into_one_store_prints_one_stream_and_merges_their_summaries(tmp_path) -> None:
    # NAN fails every case (BROKEN only some, which 4 cases need not draw). Each worker runs the kernel in its own
    # process (--in-process): no kernel worker process of its own to start.
    argv = ["run", "--kernel", "tests._fakes:NAN", "--oracle", "jax_reference", "--examples", "4", "--in-process"]
    argv += ["--profile", "ci", "--max-shrinks", "1", "--jobs", "2", "--out", str(tmp_path)]
    proc = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr  # NAN fails: a worker's discrepancy is the run's
    runs = [json.loads(p.read_text()) for p in tmp_path.glob("records/*/run.json")]
    assert sorted(r["shard"] for r in runs) == ["0/2", "1/2"]
    assert len({r["jobs_parent"] for r in runs}) == 1
    assert "merged summary of 2 of 2 shards" in proc.stdout
    assert "pairwise coverage of declared features" in proc.stdout.split("merged summary")[1]
    assert _fakes.NAN.name in proc.stdout.split("merged summary")[1]
    # One stream: each case once, numbered over the run (never per shard), and one summary, the merged one.
    cases = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert [line.partition("]")[0] for line in cases] == [f"[{i}/4" for i in range(1, 5)], proc.stdout
    assert all(f"{_fakes.NAN.name} FAIL" in line for line in cases)
    assert proc.stdout.count("verdict:") == 1 and proc.stdout.count("up to 4 cases, profile ci") == 1, proc.stdout
    assert "summary of shard" not in proc.stdout and "results ->" not in proc.stdout
    # Each shard's own lines, its summary among them, are in its log, which the run names.
    logs = sorted(tmp_path.glob("logs/jobs-*/shard-*-of-2.log"))
    assert [p.name for p in logs] == ["shard-0-of-2.log", "shard-1-of-2.log"]
    assert f"{logs[0].parent}/shard-*-of-2.log" in proc.stdout
    for i, log in enumerate(logs):
        text = log.read_text()
        assert f"summary of shard {i}/2" in text and "verdict:" in text and "up to 2 cases" in text
        assert [line.partition("]")[0] for line in text.splitlines() if line.startswith("[")] == ["[1/2", "[2/2"]


def test_the_ci_workflow_runs_every_shard_then_merges_reports_and_gates() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "shards.yml").read_text())
    count = int(wf["env"]["SHARDS"])
    assert wf["jobs"]["shard"]["strategy"]["matrix"]["index"] == list(range(count))
    assert wf["jobs"]["merge"]["needs"] == "shard" and wf["jobs"]["merge"]["if"] == "always()"
    (shard_run,) = [s["run"] for s in wf["jobs"]["shard"]["steps"] if "nox -s tpu" in s.get("run", "")]
    command = shard_run.replace("\\\n", " ").split("||")[0]
    command = command.replace("${{ matrix.index }}", str(count - 1)).replace("$SHARDS", str(count))
    argv = shlex.split(command.replace("$EXAMPLES", "200").split(" -- ", 1)[1])
    args = cli.build_parser().parse_args(["run", *argv])
    assert args.shard == Shard(count - 1, count)
    merge_steps = [s["run"] for s in wf["jobs"]["merge"]["steps"] if "run" in s]
    assert any(r.startswith("python -m harness merge stores/store-* --out reports/store") for r in merge_steps)
    assert any(r.startswith("python -m harness report --store reports/store") for r in merge_steps)


def _reported_failure(
    store: Path, run_id: str, name: str, how: str, feats: list[str], n: int = 1, **search_info: object
) -> Path:
    """A worker's reported failure as `run` writes it: the failure file, and the kernel's and oracle's
    shrunk records naming it."""
    path = store / "failures" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    sig = {"how": [["k", how, ["out"]]], "features": feats}
    search = {"failure": f"{n} of 2", "shrunk": True, "signature": how, "signature_parts": sig} | search_info
    failure = FailureRecord(kernel="k", oracles=("torch_sdpa",), grads=True, case={}, search=search)
    path.write_text(json.dumps(failure.to_json()))
    for impl in ("k", "torch_sdpa"):
        rec = CaseRecord(
            run_id=run_id, case_id=name, implementation=impl, passed=False, comparisons=[], shrunk=True
        ).to_json() | {"failure_file": str(path)}
        (store / "records" / run_id / f"{name}--{impl}.json").write_text(json.dumps(rec))
    return path


def test_one_bug_found_by_two_shards_keeps_one_failure_file(tmp_path: Path) -> None:
    from harness.running.jobs.same_bug import SAME_BUG_DIR, same_bugs

    runs = []
    for i in range(2):
        (tmp_path / "records" / f"r{i}").mkdir(parents=True)
        runs.append(RunRecord(run_id=f"r{i}", more={"shard": f"{i}/2"}))
    causal = _reported_failure(tmp_path, "r0", "a-causal", "wrong values", ["mask:causal_top_left"])
    tiled = _reported_failure(tmp_path, "r1", "b-tiled", "wrong values", ["mask:causal_top_left", "tiling:x"])
    raised = _reported_failure(tmp_path, "r1", "c-raised", "raised ValueError", ["mask:causal_top_left"], n=2)
    # Shard 0 found a failure at segments, shard 1 the same one at fewer features: shard 1's is kept.
    segments = _reported_failure(tmp_path, "r0", "d-seg", "non-finite", ["mask:segments", "tiling:x"], n=2)
    general = _reported_failure(tmp_path, "r1", "e-gen", "non-finite", ["tiling:x"], n=1)
    merged = same_bugs(tmp_path, runs)
    merged.sort(key=lambda b: b.kept.name)
    assert [(b.kept, b.moved) for b in merged] == [
        (causal, causal.parent / SAME_BUG_DIR / tiled.name),
        (general, general.parent / SAME_BUG_DIR / segments.name),
    ]
    assert sorted(p.name for p in (tmp_path / "failures").glob("*.json")) == [causal.name, raised.name, general.name]
    kept = json.loads(causal.read_text())["search"]
    assert kept["also_found"] == [
        {
            "file": f"{SAME_BUG_DIR}/{tiled.name}",
            "shard": 1,
            "signature": "k wrong values in out (at mask:causal_top_left, tiling:x)",
        }
    ]
    moved = json.loads((causal.parent / SAME_BUG_DIR / tiled.name).read_text())
    assert moved["search"]["same_bug_as"] == causal.name  # nothing lost: the file is kept, and says whose bug it is
    # The records of the other shard's failure name the bug's file: the gate and report count it once.
    for impl in ("k", "torch_sdpa"):
        rec = json.loads((tmp_path / "records" / "r1" / f"b-tiled--{impl}.json").read_text())
        assert rec["failure_file"] == str(causal)
    assert "the same bug as" in merged[0].line()
    # Merged already: a second look moves nothing (the records of both shards name one file now).
    assert [b.moved for b in same_bugs(tmp_path, runs)] == [None, None]


def test_two_shards_failures_named_as_one_finding_keep_one_file_the_reduced_one(tmp_path: Path) -> None:
    # jax 0.7.0, `run --kernel jax_xla --examples 200 --seed 1`: both shards met the float64 finding, one at
    # segments and a window (its shrink budget spent before the trigger search), one at near_max values
    # (reduced): two files for one known bug. Named as one finding, they are one bug; the reduced file is kept.
    from harness.running.jobs.same_bug import SAME_BUG_DIR, same_bugs

    runs = []
    for i in range(2):
        (tmp_path / "records" / f"r{i}").mkdir(parents=True)
        runs.append(RunRecord(run_id=f"r{i}", more={"shard": f"{i}/2"}))
    name = "jax_xla_float64_softmax_in_float32"
    first = _reported_failure(tmp_path, "r0", "a", "wrong values", ["dtype:float64", "mask:window"], finding=name)
    trigger = ["dtype:float64", "regime:near_max"]
    reduced = _reported_failure(tmp_path, "r1", "b", "wrong values", trigger, finding=name, trigger=trigger)
    other = _reported_failure(tmp_path, "r1", "c", "wrong values", ["dtype:float64"], n=2, finding="another")
    (merged,) = same_bugs(tmp_path, runs)
    assert (merged.kept, merged.moved) == (reduced, reduced.parent / SAME_BUG_DIR / first.name)
    assert sorted(p.name for p in (tmp_path / "failures").glob("*.json")) == [reduced.name, other.name]


def test_two_shards_failures_whose_triggers_nest_are_said_to_and_both_kept(tmp_path: Path) -> None:
    # The planted paged page-table bug: one shard's reads past the table raise on the plainest case, the other's
    # valid lengths keep them in bounds and give wrong values. One may be the other with another symptom: said.
    from harness.running.jobs.same_bug import nested, same_bugs

    runs = []
    for i in range(2):
        (tmp_path / "records" / f"r{i}").mkdir(parents=True)
        runs.append(RunRecord(run_id=f"r{i}", more={"shard": f"{i}/2"}))
    raised = _reported_failure(tmp_path, "r0", "a", "raised JaxRuntimeError", [], trigger=[])
    lengths = ["mask:kv_lengths"]
    wrong = _reported_failure(tmp_path, "r1", "b", "wrong values", lengths, trigger=lengths)
    unreduced = _reported_failure(tmp_path, "r1", "c", "non-finite", ["mask:kv_lengths", "dtype:x"], n=2)
    assert same_bugs(tmp_path, runs) == []
    trigger_holds, case_has = nested(tmp_path, runs)
    assert trigger_holds.startswith(f"k: the trigger of {wrong} holds that of {raised}")
    # Not reduced (its shrink budget spent): its case, not its trigger, has the other's trigger.
    assert case_has.startswith(f"k: the case of {unreduced} has the trigger of {raised}")
