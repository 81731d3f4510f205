"""Hypothesis profiles: one place, chosen by --profile or ATTN_HARNESS_PROFILE."""

from __future__ import annotations

import pytest

from harness import cli
from harness.core import profiles


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
