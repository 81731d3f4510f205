"""harness.upstream.candidate: the upstream fixes a candidate jax brings that a fork lacks (what `upgrade` prints
for a fork). Forks are planted as in tests/test_fork_base.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.commands import upgrade as upgrade_cmd
from harness.environments import envs, upgrade
from harness.upstream import candidate, replays
from harness.upstream.replays import Bug, Replay, Verdict
from tests import test_fork_base

# The planted forks and the releases they were made from, as tests/test_fork_base.py plants them.
store, forks = test_fork_base.store, test_fork_base.forks
SPLASH_FORK = "pallas_splash=splash_0112:make_splash_mha"


def test_the_bugs_a_release_brings_are_those_fixed_after_the_base_up_to_it() -> None:
    assert [b.id for b in replays.fixed_after("pallas_splash", "0.4.30", through="0.8.0")] == [
        "SPL-1",
        "SPL-2",
        "SPL-3",
    ]
    assert [b.id for b in replays.fixed_after("pallas_splash", "0.4.31", through="0.8.0")] == ["SPL-3"]
    assert replays.fixed_after("pallas_splash", "0.11.2", through="0.11.9") == []
    assert [b.id for b in replays.fixed_after("pallas_splash", "0.11.2", through="0.12.0")] == ["SPL-5"]


def test_a_release_before_the_fix_brings_nothing_and_runs_nothing(store: Path, forks: Path, monkeypatch) -> None:
    monkeypatch.setattr(replays, "replay", lambda *a, **k: pytest.fail("nothing to replay"))
    found = candidate.brought(SPLASH_FORK, "0.11.9", store=store)
    assert (found.base, found.replays, found.why) == ("0.11.2", [], "")
    assert candidate.lines(found) == [
        f"fork {SPLASH_FORK}: upstream fixes jax 0.11.9 brings: none (the history table lists no fix of its kernel "
        "after its base jax 0.11.2 up to it)"
    ]


def test_the_fix_the_candidate_brings_is_replayed_on_the_fork_and_named_when_lacking(
    store: Path,
    forks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = []

    def replay(bug: Bug, fork: str, *, timeout_s: float) -> Replay:
        asked.append((bug.id, fork))
        return Replay(bug=bug, verdict=Verdict.STILL, why="exit 1: dsinks off", command=f"python SPL-5.py {fork}")

    monkeypatch.setattr(replays, "replay", replay)
    lines = candidate.report(["pallas_flash", SPLASH_FORK], "0.12.1", store=store)
    assert asked == [("SPL-5", SPLASH_FORK)]
    assert lines == [
        f"fork {SPLASH_FORK}: upstream fixes jax 0.12.1 brings since its base jax 0.11.2: 1; the fork lacks 1",
        "  SPL-5 (fixed in 0.12.0; inaccurate sinks gradient (dsinks), backward): still has it: exit 1: dsinks off",
        f"    replay: python SPL-5.py {SPLASH_FORK}",
    ]


@pytest.mark.parametrize(
    "spec, sources, message",
    [
        pytest.param(SPLASH_FORK, "empty", "no upstream source of pallas_splash kept in", id="no-sources-kept"),
        pytest.param("pallas_splash=no_such_fork:f", "fixture", "not found on the import path", id="no-module"),
    ],
)
def test_a_fork_that_cannot_be_placed_says_why_and_how_to_fix_it(
    spec: str,
    sources: str,
    message: str,
    store: Path,
    forks: Path,
    tmp_path: Path,
) -> None:
    found = candidate.brought(spec, "0.12.1", store=tmp_path / "empty" if sources == "empty" else store)
    (line,) = candidate.lines(found)
    assert line.startswith(f"fork {spec}: upstream fixes jax 0.12.1 brings: cannot tell: ") and message in line
    if sources == "empty":
        assert line.endswith(f"run `python -m harness fork-base {spec}` once (it downloads them)")


def test_built_in_kernels_or_an_unknown_candidate_jax_print_nothing() -> None:
    assert candidate.report(["pallas_flash", "pallas_splash"], "0.12.1") == []
    assert candidate.report([SPLASH_FORK], None) == []


@pytest.mark.slow
def test_the_fork_made_from_0112_lacks_spl5_which_0121_brings(store: Path, forks: Path) -> None:
    (found,) = [candidate.brought(SPLASH_FORK, "0.12.1", store=store)]
    assert [(r.bug.id, r.verdict) for r in found.replays] == [("SPL-5", Verdict.STILL)]
    assert "the fork lacks 1" in candidate.lines(found)[0]


def test_upgrade_gates_a_fork_on_both_sides_and_names_the_fix_the_candidate_brings_that_it_lacks(
    store: Path,
    forks: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`upgrade --kernel FORK`, its environments and steps faked (nothing runs): the fork is registered where
    the kernel it replaces is, with that kernel's cases, and the candidate's jax is told against its base."""
    sides = {"base": {"jax": "0.11.2"}, "cand": {"jax": "0.12.1"}}

    def environments(args, changes):  # noqa: ANN001, ANN202 - upgrade_cmd._environments'
        spec = envs.EnvSpec(python="python", requirements=(), index=envs.IndexOptions())
        return envs.Env(Path("base"), spec), envs.Env(Path("cand"), spec)

    def query(env, code, *, cwd):  # noqa: ANN001, ANN202 - upgrade.query's
        return {"pallas_splash": 3} if code == upgrade.KERNELS else sides[env.path.name]

    monkeypatch.setattr(upgrade_cmd, "_environments", environments)
    monkeypatch.setattr(upgrade, "query", query)
    monkeypatch.setattr(upgrade, "run_all", lambda *a, **k: [])
    monkeypatch.setattr(replays, "replay", _still)
    monkeypatch.setenv("ATTN_HARNESS_UPSTREAM_SOURCES", str(store))
    argv = ["upgrade", "--to", "jax==0.12.1", "--kernel", SPLASH_FORK, "--no-compile", "--no-bench"]
    main([*argv, "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert f"  kernel {SPLASH_FORK}: registered on both sides, {3 + upgrade.EXTRA_DRAWN} cases" in out
    assert f"fork {SPLASH_FORK}: upstream fixes jax 0.12.1 brings since its base jax 0.11.2: 1; the fork lacks 1" in out
    assert f"    replay: python SPL-5.py {SPLASH_FORK}" in out


def _still(bug: Bug, fork: str, *, timeout_s: float) -> Replay:
    return Replay(bug=bug, verdict=Verdict.STILL, why="exit 1: dsinks off", command=f"python SPL-5.py {fork}")


def test_a_drop_in_that_is_no_copy_of_upstreams_module_is_not_told_a_base(tmp_path: Path, store: Path) -> None:
    (line,) = candidate.lines(candidate.brought("tests._fakes:CORRECT", "0.12.1", store=store))
    assert "is no copy of jax's jax/experimental/pallas/ops/tpu/flash_attention.py (similarity 0.0" in line
    assert line.endswith("upstream's fixes reach it with the jax installed")
