"""harness.environments.watch, `python -m harness watch` against a local wheel directory (offline), its
page, and the scheduled workflow that runs it (.github/workflows/watch.yml)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.cli.commands import upgrade as upgrade_cmd
from harness.environments import envs, watch
from tests import record_builders as rb
from tests.upgrade_fakes import fake_steps
from tests.wheels import build_wheel

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "watch.yml"
MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_newer_releases_are_those_after_the_pin_in_release_order_without_pre_releases() -> None:
    listed = {"jax": ["0.9.2", "0.10.2", "0.12.1", "0.11.0", "0.13.0rc1"], "torch": ["2.15.0"], "numpy": ["2.5.5"]}
    found = watch.newer({"jax": "0.10.2", "torch": "2.15.0", "numpy": "2.4.6"}, listed)
    assert found == {"jax": ["0.11.0", "0.12.1"], "numpy": ["2.5.5"]}  # 0.9 < 0.10 as numbers; torch at its newest


def test_each_newest_release_alone_then_together_jaxs_companions_never_beside_it() -> None:
    found = {"jax": ["0.11.0", "0.12.1"], "libtpu": ["0.0.52"], "jaxlib": ["0.12.1"], "numpy": ["2.5.5"]}
    labels = [p.label for p in watch.proposals(found)]
    # jaxlib follows jax; libtpu is gated alone but the installer picks it beside jax (jax[tpu]==X).
    assert labels == ["jax==0.12.1", "libtpu==0.0.52", "numpy==2.5.5", "jax==0.12.1 numpy==2.5.5"]
    every = [p.label for p in watch.proposals({"jax": ["0.11.0", "0.12.1"]}, every_release=True)]
    assert every == ["jax==0.11.0", "jax==0.12.1"]  # one package: nothing to take together
    assert watch.proposals({"jax": ["0.12.1"]})[0].to_args() == ["--to", "jax==0.12.1"]


def test_taking_a_release_edits_its_pins_and_keeps_the_rest() -> None:
    text = "# python: 3.11\n# why jax\njax==0.10.2\njaxlib==0.10.2\nlibtpu==0.0.42.1\nnumpy==2.4.6  # note\n"
    new = watch.constraints_with(text, {"jax": "0.12.1", "jaxlib": "0.12.1"}, python="3.12")
    assert new == "# python: 3.12\n# why jax\njax==0.12.1\njaxlib==0.12.1\nlibtpu==0.0.42.1\nnumpy==2.4.6  # note\n"
    # A Python already declared leaves the line alone.
    assert watch.constraints_with(text, {"numpy": "2.5.5"}, python="3.11").splitlines()[0] == "# python: 3.11"


@pytest.fixture
def local(tmp_path: Path) -> tuple[Path, Path]:
    """A wheel directory with two releases of a pinned package (and a pre-release), and constraints pinning the
    older: the index `watch` asks, offline."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("1.0", "1.1", "1.2rc1"):
        build_wheel(wheels, "tinykernel", v, {"tinykernel/__init__.py": f"VERSION = {v!r}\n"})
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"# python: {MINOR}\n# the kernel's library\ntinykernel==1.0\n")
    return wheels, constraints


def _watch(local: tuple[Path, Path], out: Path, *extra: str) -> int:
    wheels, constraints = local
    argv = ["watch", "--package", "tinykernel", "--no-index", "--find-links", str(wheels)]
    return main([*argv, "--constraints", str(constraints), "--out", str(out), *extra])


def test_the_index_is_asked_offline_and_the_newer_release_listed(local, tmp_path, capsys) -> None:
    assert _watch(local, tmp_path / "out", "--list-only") == 0
    out = capsys.readouterr().out
    assert "tinykernel 1.0: newer 1.1" in out  # the pre-release 1.2rc1 is not offered
    data = json.loads((tmp_path / "out" / "watch.json").read_text())
    assert data["newer"] == {"tinykernel": ["1.1"]} and data["outcomes"] == []
    assert "1.1" in (tmp_path / "out" / "index.html").read_text()


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rb.real_store(tmp_path_factory)


def test_a_safe_release_is_gated_and_its_pin_bump_proposed(local, tmp_path, capsys, monkeypatch, real_store) -> None:
    sides = {"baseline": {"python": "3.11.7", "jax": "0.10.2"}, "candidate": {"python": f"{MINOR}.1", "jax": "0.10.2"}}
    fake_steps(monkeypatch, real_store, versions=sides)
    code = _watch(local, tmp_path / "out", "--no-bench", "--no-compile")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "[1/1] upgrade --to tinykernel==1.1" in out and "  SAFE: " in out
    proposal = (tmp_path / "out" / "proposal.txt").read_text()
    assert proposal == f"# python: {MINOR}\n# the kernel's library\ntinykernel==1.1\n"
    page = (tmp_path / "out" / "index.html").read_text()
    assert "SAFE: tinykernel==1.1" in page and "+tinykernel==1.1" in page and "-tinykernel==1.0" in page
    assert f"baseline on Python 3.11.7, candidate on Python {MINOR}.1" in page
    outcome = json.loads((tmp_path / "out" / "watch.json").read_text())["outcomes"][0]
    assert (outcome["verdict"], outcome["report"]) == ("SAFE", "tinykernel-1.1/index.html")
    assert (tmp_path / "out" / outcome["report"]).is_file()  # the upgrade's own report, linked from the page


def test_a_release_with_a_regression_fails_and_is_not_proposed(local, tmp_path, capsys, monkeypatch, real_store):
    fake_steps(monkeypatch, real_store, crash={("candidate", "run tests._fakes:CORRECT")})
    assert _watch(local, tmp_path / "out", "--no-bench", "--no-compile") == 1
    out = capsys.readouterr().out
    assert "  NOT SAFE: " in out
    assert not (tmp_path / "out" / "proposal.txt").exists()
    (outcome,) = json.loads((tmp_path / "out" / "watch.json").read_text())["outcomes"]
    assert outcome["regressions"] and "lost in the candidate" in outcome["regressions"][0]
    assert "lost in the candidate" in (tmp_path / "out" / "index.html").read_text()


def test_a_release_that_cannot_install_is_reported_with_the_reason(local, tmp_path, capsys, monkeypatch) -> None:
    wheels, _ = local
    (wheels / "tinykernel-1.1-py3-none-any.whl").unlink()
    build_wheel(wheels, "tinykernel", "1.1", {"tinykernel/__init__.py": ""}, requires=("no-such-dep>=1",))
    opts = envs.IndexOptions(no_index=True, find_links=(str(wheels),))
    # The resolver's own words, offline: what the gate's candidate build meets.
    reason = envs.resolution(("tinykernel==1.1",), sys.executable, opts)
    assert reason and "no-such-dep" in reason, reason

    def environments(args, changes):  # noqa: ANN001, ANN202 - upgrade's, failing as envs.build fails
        raise envs.EnvError(f"cannot build the candidate (tinykernel==1.1) environment: {reason}")

    monkeypatch.setattr(upgrade_cmd, "_environments", environments)
    assert _watch(local, tmp_path / "out") == 1
    assert "CANNOT INSTALL" in capsys.readouterr().out
    page = (tmp_path / "out" / "index.html").read_text()
    assert "CANNOT INSTALL: tinykernel==1.1" in page and "no-such-dep" in page


def test_an_unpinned_package_is_bad_usage(local, tmp_path, capsys) -> None:
    wheels, constraints = local
    argv = ["watch", "--package", "jaxx", "--no-index", "--find-links", str(wheels), "--constraints", str(constraints)]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert "--package jaxx is not pinned" in capsys.readouterr().err


# --- the scheduled workflow ---


def test_the_workflow_runs_watch_on_a_schedule_publishes_the_page_and_proposes_a_safe_bump() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as True
    assert triggers["schedule"] and re.fullmatch(r"[\d*/ ,-]+", triggers["schedule"][0]["cron"])
    steps = [s for job in wf["jobs"].values() for s in job["steps"]]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "nox -s watch" in runs
    # The page is kept whatever the verdict, and published.
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")]
    assert uploads and uploads[0]["with"]["path"] == "reports/watch" and uploads[0].get("if") == "always()"
    # A SAFE release becomes a pull request changing the constraints file to watch's proposal.
    pr = [s for s in steps if str(s.get("uses", "")).startswith("peter-evans/create-pull-request")]
    assert pr and "proposal.txt" in pr[0]["if"]
    assert "cp reports/watch/proposal.txt constraints/default.txt" in runs


def test_the_workflow_runs_a_session_the_noxfile_has() -> None:
    assert re.search(r"^def watch\(session: nox\.Session\) -> None:", (ROOT / "noxfile.py").read_text(), re.MULTILINE)
