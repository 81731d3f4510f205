"""Hypothesis profiles: one place, chosen by --profile or ATTN_HARNESS_PROFILE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.core import profiles

ROOT = Path(__file__).resolve().parents[1]


def test_every_profile_is_registered_with_a_shrink_budget():
    assert set(profiles.PROFILES) == {"dev", "ci", "nightly", "tpu"}
    assert set(profiles.SHRINK_BUDGETS) == set(profiles.PROFILES)
    assert profiles.get("ci").derandomize
    assert not profiles.get("dev").derandomize
    assert profiles.get("nightly").max_examples > profiles.get("ci").max_examples


def test_argument_beats_environment_beats_default(monkeypatch):
    monkeypatch.delenv(profiles.PROFILE_ENV, raising=False)
    assert profiles.profile_name() == profiles.DEFAULT_PROFILE
    monkeypatch.setenv(profiles.PROFILE_ENV, "nightly")
    assert profiles.profile_name() == "nightly"
    assert profiles.profile_name("ci") == "ci"


def test_unknown_profile_names_the_choices(monkeypatch):
    with pytest.raises(ValueError, match="choose one of"):
        profiles.profile_name("weekly")
    monkeypatch.setenv(profiles.PROFILE_ENV, "weekly")
    with pytest.raises(ValueError, match="ATTN_HARNESS_PROFILE"):
        profiles.profile_name()


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["run", "--profile", "weekly"], id="unknown-profile"),
        pytest.param(["run", "--case-timeout", "0"], id="zero-timeout"),
        pytest.param(["run", "--max-shrinks", "-1"], id="negative-shrinks"),
        pytest.param(["run", "--grid-order-seed", "-3"], id="negative-grid-seed"),
        pytest.param(["run", "--uninitialized-memory", "garbage"], id="bad-fill"),
    ],
)
def test_bad_run_options_exit_2_with_one_line(tmp_path, capsys, argv):
    assert cli.main([*argv, "--out", str(tmp_path)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# The smallest causal pallas_flash case cut into several inner key steps (its first smoke case), found by a
# derandomized Hypothesis find three times in one process: importing nothing else, then after
# harness.running.search and tests.test_smoke, then after every adapter module as well (contract.registry()).
_FIND = """
import harness
from harness.core import contract, smoke
wanted = frozenset({"mask:causal_top_left", "tiling:several_minor", "dtype:float32", "lengths:equal"})
flash = contract.resolve("pallas_flash")
found = [smoke.smallest(flash, wanted).case_id]
import harness.running.search, tests.test_smoke
found.append(smoke.smallest(flash, wanted).case_id)
contract.registry()  # imports every adapter module: their literals once fed the next find's draws
found.append(smoke.smallest(flash, wanted).case_id)
print(*found)
"""


def test_a_derandomized_find_is_the_same_whatever_else_a_process_imported():
    # Hypothesis draws some values from the literals of loaded first-party modules: without
    # profiles.draw_no_local_constants the same find, before and after every adapter module was imported
    # in a process that had imported harness.running.search, gave B=1 causal and then B=2 causal+segments.
    # Hypothesis rescans the loaded modules whenever sys.modules grows, so one process, importing more
    # between its finds, stands in for processes that imported different things.
    assert profiles.draw_no_local_constants()  # the hook exists in the pinned Hypothesis
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _FIND], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    found = done.stdout.split()
    assert len(found) == 3 and len(set(found)) == 1, found


# A first-party module with a literal no strategy would draw by itself, then 2000 derandomized integer draws: do they
# meet the literal? Hypothesis draws some values from such literals unless profiles.draw_no_local_constants ran.
_LITERAL_DRAWN = """
import sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "hook":
    from harness.core import profiles
    assert profiles.draw_no_local_constants()
import marked  # noqa: F401 - loaded: its literal is one of this process's local constants
import hypothesis
from hypothesis import Phase, settings, strategies as st
seen = []
done = settings(derandomize=True, max_examples=2000, phases=(Phase.generate,), database=None)
try:
    hypothesis.find(st.integers(), lambda x: seen.append(x) and False, settings=done)
except hypothesis.errors.NoSuchExample:
    pass
print(len(seen), 987654321 in seen)
"""


@pytest.mark.parametrize(("hook", "drawn"), [("hook", False), ("none", True)])
def test_the_hook_keeps_the_literals_of_loaded_modules_out_of_the_draws(tmp_path, hook, drawn):
    # Without the hook the literal is drawn (the row that shows this check can fail); with it, never.
    (tmp_path / "marked.py").write_text("MARK = 987654321\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", _LITERAL_DRAWN, str(tmp_path), hook]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2000", str(drawn)]
