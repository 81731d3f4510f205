"""`fork-base`: a fork's upstream base, upstream's hunks since, and upstream's fixes replayed on it.

Planted forks are older releases' kernel modules (tests/fixtures/upstream_sources.tar.gz: flash 0.9.0,
splash 0.11.2 and 0.12.0, read from the wheels) with one local edit; the installed jax is the newest.
"""

from __future__ import annotations

import importlib.metadata
import tarfile
from pathlib import Path

import pytest

from harness.cli import main
from harness.upstream import Fork, examine, lineage, replays, sources
from harness.upstream.lineage import State
from harness.upstream.sources import Source

FIXTURE = Path(__file__).parent / "fixtures" / "upstream_sources.tar.gz"
FLASH, SPLASH = sources.KERNELS["pallas_flash"][0], sources.KERNELS["pallas_splash"][0]
LOCAL_EDIT = ("MIN_BLOCK_SIZE = 128", "MIN_BLOCK_SIZE = 256  # our tiles")
SPLASH_EDIT = ("NUM_LANES = 128", "NUM_LANES = 128  # ours")
# SPL-5's fix (0.12.0), both places, as a fork would cherry-pick it.
SPL5_FIX = [
    (
        "dsinks = jnp.sum(sinks_exp.astype(o.dtype) * do * o)",
        "dsinks = jnp.sum(\n        sinks_exp * o.astype(jnp.float32) * do.astype(jnp.float32)\n"
        "    ).astype(sinks.dtype)",
    ),
    (
        "dsinks = jnp.sum(sinks_exp.astype(o.dtype) * o * do, axis=(-1, -2))",
        "dsinks = jnp.sum(\n        sinks_exp * o.astype(jnp.float32) * do.astype(jnp.float32),\n"
        "        axis=(-1, -2),\n    ).astype(sinks.dtype)",
    ),
]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    out = tmp_path / "sources"
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(out, filter="data")
    return out


def plant(where: Path, name: str, text: str, edits: list[tuple[str, str]]) -> None:
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (where / f"{name}.py").write_text(text)


@pytest.fixture
def forks(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Modules of planted forks in a folder on the import path, the working directory."""
    where = tmp_path / "forks"
    where.mkdir()
    plant(where, "flash_090", (store / "0.9.0" / FLASH).read_text(), [LOCAL_EDIT])
    plant(where, "splash_0112", (store / "0.11.2" / SPLASH).read_text(), [SPLASH_EDIT])
    plant(where, "splash_0112_fixed", (store / "0.11.2" / SPLASH).read_text(), [SPLASH_EDIT, *SPL5_FIX])
    today = sources.installed("pallas_splash")
    assert today is not None
    plant(where, "splash_today", today.text, [])
    monkeypatch.syspath_prepend(str(where))
    monkeypatch.chdir(where)
    return where


def test_the_base_of_a_flash_fork_is_the_release_it_was_made_from_and_its_edit_is_shown(
    store: Path, forks: Path
) -> None:
    fork = Fork.named("pallas_flash=flash_090:flash_attention")
    found = examine(fork, sources.sources(store, "pallas_flash"))
    assert (found.base.release, found.base.changed) == ("0.9.0", 2)
    assert f"-{LOCAL_EDIT[0]}\n+{LOCAL_EDIT[1]}\n" in found.base.edits
    assert found.newest == importlib.metadata.version("jax") + sources.INSTALLED
    assert found.hunks and {h.state for h in found.hunks} == {State.MISSING}
    assert any("jax.ShapeDtypeStruct.like(q)" in h.text for h in found.hunks)


def test_the_splash_fork_lacks_upstreams_fix_of_spl5_and_the_hunk_names_it(
    store: Path, forks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["fork-base", "pallas_splash=splash_0112:make_splash_mha", "--sources", str(store), "--no-replay"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "base: jax 0.11.2: 2 lines changed" in out
    assert "missing, arrived in 0.12.0; 0.12.0 fixed SPL-5" in out
    assert "-    dsinks = jnp.sum(sinks_exp.astype(o.dtype) * do * o)" in out


def test_a_cherry_picked_fix_is_carried(store: Path, forks: Path) -> None:
    found = examine(
        Fork.named("pallas_splash=splash_0112_fixed:make_splash_mha"), sources.sources(store, "pallas_splash")
    )
    assert found.base.release == "0.11.2"
    dsinks = [h for h in found.hunks if "dsinks = jnp.sum(" in h.text]
    assert len(dsinks) == 2 and {h.state for h in dsinks} == {State.CARRIED}


def test_each_hunk_is_carried_missing_or_in_conflict() -> None:
    base = Source(release="1.0", text="".join(f"line {i}\n" for i in range(30)))
    new = base.text.replace("line 3\n", "line 3 fixed\n").replace("line 14\n", "line 14 fixed\n")
    new = new.replace("line 25\n", "line 25 fixed\n")
    fork = base.text.replace("line 3\n", "line 3 fixed\n").replace("line 14\n", "line 14 ours\n")
    found = lineage.hunks(base, Source(release="2.0", text=new), fork, [])
    assert [h.state for h in found] == [State.CARRIED, State.CONFLICTS, State.MISSING]
    assert [h.header for h in found] == ["@@ -1,7 +1,7 @@", "@@ -12,7 +12,7 @@", "@@ -23,7 +23,7 @@"]


def test_the_base_of_identical_releases_is_the_oldest_told_as_a_range() -> None:
    known = [Source(release=r, text=t) for r, t in (("1.0", "a\n"), ("1.1", "b\n"), ("1.2", "b\n"), ("2.0", "c\n"))]
    found = lineage.base_of("b\nmine\n", known)
    assert (found.named, found.changed) == ("1.1 .. 1.2", 1)


def test_bugs_fixed_after_the_base_are_the_kernels_own() -> None:
    assert [b.id for b in replays.fixed_after("pallas_splash", "0.11.2")] == ["SPL-5"]
    assert [b.id for b in replays.fixed_after("pallas_splash", "0.4.30")][:2] == ["SPL-1", "SPL-2"]
    assert replays.fixed_after("pallas_flash", "0.4.30") == []
    assert [b.id for b in replays.fixed_after("pallas_gpu", "0.5.0")] == ["MHA-2", "MHA-5", "MHA-3", "MHA-4"]


def test_a_bug_without_a_trigger_or_not_cpu_visible_cannot_be_told_and_runs_nothing() -> None:
    bugs = {b.id: b for b in replays.bugs("pallas_splash")}
    for bug, why in (("SPL-4", "not CPU-visible"), ("SPL-2", "no trigger recorded")):
        done = replays.replay(bugs[bug], "pallas_splash=nowhere:f")
        assert (done.verdict, done.command) == (replays.Verdict.UNKNOWN, "")
        assert done.why.startswith(why)


@pytest.mark.parametrize(
    "spec, message",
    [
        pytest.param("pallas_flash", "names no fork", id="a-built-in"),
        pytest.param("tokamax_xla=m:f", "has no upstream module here", id="not-a-pallas-kernel"),
        pytest.param("pallas_flash=no_such_module_here:f", "not found on the import path", id="no-module"),
    ],
)
def test_bad_forks_are_refused_with_the_fix(spec: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fork-base", spec, "--sources", ".", "--no-replay"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_the_fork_fails_on_spl5_and_todays_upstream_and_the_cherry_pick_pass(
    store: Path, forks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["fork-base", "pallas_splash=splash_0112:make_splash_mha", "--sources", str(store)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "SPL-5 (fixed in 0.12.0; inaccurate sinks gradient (dsinks), backward): still has it" in out
    assert "FAIL: the fork still has SPL-5 (fixed upstream in 0.12.0; replay: python " in out
    assert "triggers/SPL-5.py pallas_splash=splash_0112:make_splash_mha" in out
    code = main(["fork-base", "pallas_splash=splash_0112_fixed:make_splash_mha", "--sources", str(store)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "SPL-5 (fixed in 0.12.0; inaccurate sinks gradient (dsinks), backward): fixed in the fork" in out
    code = main(["fork-base", "pallas_splash=splash_today:make_splash_mha", "--sources", str(store)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "lists no bug of pallas_splash fixed after jax" in out
