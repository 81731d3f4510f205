"""Failure files: everything a replay needs is written, and read back strictly."""

from __future__ import annotations

import json

import pytest

from harness import cli
from harness.core import contract
from harness.core.compare import TOLERANCE_VERSION
from harness.running import search
from harness.running.failures import FailureFileError, load_failure, replay, version_differences, write_failure
from harness.running.runner import Check, run_case
from harness.running.worker import implementation_spec
from harness.runtime import compat
from tests import _fakes


def _failed(case=None, grads=False):
    result = run_case(case or _fakes.small_case(), [_fakes.BROKEN], grads=grads)
    assert not result.passed
    return result


def test_a_written_failure_reads_back_and_replays_the_same_failure(tmp_path):
    result = _failed()
    options = compat.InterpretOptions(detect_races=True, uninitialized_memory="zero", random_seed=4)
    path = write_failure(tmp_path, result, Check(kernel=_fakes.BROKEN, grads=False, interpret=options, time_limit=30.0))
    assert path.parent == tmp_path / "failures"
    doc = json.loads(path.read_text())
    assert doc["kernel"] == "tests._fakes:BROKEN"
    assert doc["interpret"] == options.to_json() and doc["time_limit"] == 30.0
    assert doc["tolerance_version"] == TOLERANCE_VERSION
    assert doc["results"]["tests._fakes:BROKEN"]["comparisons"][0]["quantity"] == "out"
    assert "out: err" in doc["failure"]
    ff = load_failure(path)
    assert ff.case == result.case and ff.interpret == options and ff.time_limit == 30.0
    again = replay(ff, time_limit=None)
    assert not again.passed
    assert compat.interpret_options() == compat.InterpretOptions()  # the replay's options end with it


def test_the_same_failure_gets_the_same_file(tmp_path):
    a = write_failure(tmp_path, _failed(), Check(kernel=_fakes.BROKEN, grads=False))
    b = write_failure(tmp_path, _failed(), Check(kernel=_fakes.BROKEN, grads=False))
    assert a == b and len(list((tmp_path / "failures").iterdir())) == 1


def test_specs_resolve_back_to_the_implementation():
    flash = contract.resolve("pallas_flash")
    assert implementation_spec(flash) == "pallas_flash"
    dropin = contract.resolve("tests.planted.fwd_rescale_alpha:flash_attention")
    assert implementation_spec(dropin) == "tests.planted.fwd_rescale_alpha:flash_attention"
    assert contract.resolve(implementation_spec(_fakes.NAN)) is _fakes.NAN


def test_retargeting_checks_the_new_kernels_contract(tmp_path):
    path = write_failure(tmp_path, _failed(), Check(kernel=_fakes.BROKEN, grads=False))
    ff = load_failure(path)
    with pytest.raises(FailureFileError, match="outside pallas_flash's contract"):
        ff.retarget("pallas_flash")  # q_len=16 is not a multiple of 128


def test_version_differences_name_library_and_both_versions():
    installed = compat.library_versions()
    assert version_differences(installed) == []
    changed = version_differences({**installed, "jax": "0.0.1"})
    assert changed == [f"jax 0.0.1 -> {installed['jax']}"]


def test_run_writes_a_failure_file_and_prints_the_command_that_replays_it(tmp_path, capsys):
    out = tmp_path / "store"
    argv = ["run", "--kernel", "tests._fakes:BROKEN", "--examples", "4", "--seed", "1", "--no-grads", "--detect-races"]
    # One drawn case of the four fails. No smoke cases, no pool and no kernel worker: finding a fake kernel's smoke
    # set and starting a worker process cost more than the run (the worker: tests/test_faults.py).
    argv += ["--profile", "dev", "--no-smoke", "--no-pool", "--in-process"]
    assert cli.main([*argv, "--max-shrinks", "3", "--out", str(out)]) == cli.EXIT_FAIL
    stdout = capsys.readouterr().out
    (path,) = (out / "failures").glob("*.json")
    assert f"replay: python -m harness repro {path}" in stdout
    doc = json.loads(path.read_text())
    # Three runs of shrinking, and the trigger search's share past them (harness.running.search.TRIGGER_SHARE).
    assert doc["search"]["profile"] == "dev" and doc["search"]["shrink_runs"] <= 3 + 3 // search.TRIGGER_SHARE
    assert doc["interpret"]["detect_races"] and doc["kernel"] == "tests._fakes:BROKEN"
    records = [json.loads(p.read_text()) for p in out.glob("records/*/*.json")]
    (shrunk,) = [r for r in records if r.get("shrunk") and r["implementation"] == "tests._fakes:BROKEN"]
    assert shrunk["failure_file"] == str(path)


@pytest.mark.parametrize(
    ("first", "flags"),
    [
        # The drawn cases meet both bugs. No smoke cases and no pool: the whole smoke set of a fake kernel, which
        # a run of more cases than its feature cases looks for, costs more than the run.
        pytest.param(False, ["--no-smoke", "--no-pool"], id="every-failure"),
        # The first failure is the first smoke case's (causal): the run stops there, before the rest are looked for.
        pytest.param(True, ["--first-failure"], id="first-failure"),
    ],
)
def test_run_writes_a_failure_file_and_a_replay_line_for_each_distinct_failure(tmp_path, capsys, first, flags):
    out = tmp_path / "store"
    # No kernel worker: starting its process costs more than the run (the worker: tests/test_faults.py).
    argv = ["run", "--kernel", "tests._fakes:TWO_BUGS", "--examples", "12", "--seed", "1", "--no-grads", "--in-process"]
    argv += ["--profile", "dev", "--max-shrinks", "10", "--out", str(out), *flags]
    assert cli.main(argv) == cli.EXIT_FAIL
    stdout = capsys.readouterr().out
    paths = sorted((out / "failures").glob("*.json"))
    docs = [json.loads(p.read_text()) for p in paths]
    kinds = sorted("raised ValueError" in d["search"]["signature"] for d in docs)
    assert kinds == ([True] if first else [False, True])  # the causal bug raises, BROKEN's gives wrong values
    assert sorted(d["search"]["failure"] for d in docs) == [f"{i} of {len(docs)}" for i in range(1, len(docs) + 1)]
    for path in paths:
        assert f"replay: python -m harness repro {path}" in stdout
    records = [json.loads(p.read_text()) for p in out.glob("records/*/*.json")]
    shrunk = {r["failure_file"] for r in records if r.get("shrunk") and r["implementation"] == "tests._fakes:TWO_BUGS"}
    assert shrunk == {str(p) for p in paths}


def test_pin_adds_a_fixed_case_to_the_corpus_and_refuses_a_failing_one(tmp_path, capsys):
    path = write_failure(tmp_path, _failed(), Check(kernel=_fakes.BROKEN, grads=False))
    corpus = tmp_path / "corpus"
    assert cli.main(["pin", str(path), "--corpus", str(corpus)]) == cli.EXIT_FAIL
    assert "not pinned" in capsys.readouterr().out and not corpus.exists()
    assert cli.main(["pin", str(path), "--corpus", str(corpus), "--kernel", "tests._fakes:CORRECT"]) == cli.EXIT_OK
    (pinned,) = corpus.glob("*.json")
    ff = load_failure(pinned)
    assert ff.doc["kernel"] == "tests._fakes:CORRECT"
    assert ff.doc["pinned"]["found_with"] == "tests._fakes:BROKEN"
    assert replay(ff).passed
