"""harness.environments.pythons: the Pythons the pins declare, where a machine has them, and the noxfile's
rule that a missing interpreter fails a session (never a skip that exits 0)."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from harness.environments import envs, pythons

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TEXT = (ROOT / "constraints" / "default.txt").read_text()
MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_a_constraints_file_declares_its_pythons_in_one_line() -> None:
    assert pythons.declared("jax==0.12.1\n# python: 3.12 3.14 3.13\n") == ("3.14", "3.13", "3.12")
    assert pythons.declared("jax==0.10.2\n") == ()
    assert pythons.DEFAULT == pythons.declared(DEFAULT_TEXT) and pythons.DEFAULT
    assert pythons.declared((ROOT / "constraints" / "previous.txt").read_text()) == ("3.11",)


def test_the_default_pythons_are_what_the_pinned_releases_require() -> None:
    # Every pinned distribution installed here admits the oldest declared Python, and some pin needs it (jax >= 0.11
    # needs 3.12): the declaration is neither looser nor tighter than the releases.
    oldest = min(pythons.DEFAULT, key=lambda v: tuple(map(int, v.split("."))))
    below = f"{oldest.split('.')[0]}.{int(oldest.split('.')[1]) - 1}"
    needs_it = []
    for name in envs.pinned(DEFAULT_TEXT):
        try:
            spec = SpecifierSet(md.metadata(name).get("Requires-Python") or "")
        except md.PackageNotFoundError:
            continue  # not in this session's environment (mutmut's extra)
        assert spec.contains(f"{oldest}.0"), f"{name} {md.version(name)} needs Python {spec}, not {oldest}"
        needs_it += [name] if not spec.contains(f"{below}.99") else []
    assert needs_it, f"no pin needs Python {oldest}: the oldest declared Python could be older"
    assert MINOR in pythons.DEFAULT  # the suite itself runs on a declared Python


def test_find_returns_a_running_interpreter_of_that_version() -> None:
    found = pythons.find(MINOR)
    assert found and pythons.version_of(found) == MINOR
    assert pythons.find("2.9") is None


def test_the_search_tries_the_first_then_newer_ones_nearest_first_then_older() -> None:
    order = pythons.search_order(sys.executable)
    assert order[0] == sys.executable
    versions = [pythons.version_of(p) for p in order[1:]]
    key = lambda v: tuple(map(int, v.split(".")))  # noqa: E731
    newer = [v for v in versions if key(v) > key(MINOR)]
    older = [v for v in versions if key(v) < key(MINOR)]
    assert versions == newer + older and newer == sorted(newer, key=key) and older == sorted(older, key=key)[::-1]


def test_the_missing_message_names_the_pythons_and_how_to_install_one() -> None:
    text = pythons.missing(("3.12", "3.13"))
    assert "need Python 3.12 to 3.13" in text and "uv python install 3.13" in text and "pyenv install 3.13" in text


def test_an_environment_goes_to_the_python_its_pins_need(tmp_path: Path) -> None:
    # A release that requires another Python than the first tried is built on the next one: offline, from a
    # local wheel directory, with uv, as upgrade's candidate is.
    others = [p for p in pythons.search_order(sys.executable)[1:]]
    if not others:
        pytest.skip("one Python installed here: no other to move to")
    other = pythons.version_of(others[0])
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    from tests.wheels import build_wheel

    # A wheel for that Python only, as jaxlib's are: uv finds none for this one.
    tag = f"cp{other.replace('.', '')}-none-any"
    build_wheel(wheels, "tinykernel", "2.0", {"tinykernel/__init__.py": ""}, tag=tag)
    opts = envs.IndexOptions(no_index=True, find_links=(str(wheels),))
    spec = envs.EnvSpec(python=sys.executable, requirements=("tinykernel==2.0",), index=opts, label="tinykernel 2.0")
    log: list[str] = []
    env = envs.build_first(spec, pythons.search_order(sys.executable), tmp_path / "envs", log=log.append)
    assert pythons.version_of(str(env.python)) == other and "tinykernel" in env.installed()
    assert any(f"not on {sys.executable}" in line and "Python" in line for line in log), log
    # Nowhere to go: each Python tried is named.
    with pytest.raises(envs.EnvError, match="on any Python installed here"):
        envs.build_first(spec, [sys.executable], tmp_path / "envs", log=log.append)


def test_a_missing_interpreter_fails_the_session_naming_what_to_install(tmp_path: Path) -> None:
    # The README's commands on a machine whose only Python is older than the pins need: nox run by that Python,
    # nothing else on PATH, no pyenv, no uv-managed interpreter, no download. Exit non-zero, never "skipped".
    outside = next((p for v in ("3.11", "3.10") if (p := pythons.find(v))), None)
    if outside is None:
        pytest.skip("no Python older than the default pins' installed here to run nox with")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(outside)
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "PYENV_ROOT": str(tmp_path / "no-pyenv"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        # nox and its dependencies are pure Python: this session's copies serve the older interpreter.
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "NO_COLOR": "1",
    }
    cmd = [outside, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "tests", "--download-python", "never"]
    done = subprocess.run(
        [*cmd, "--envdir", str(tmp_path / "nox")], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    oldest, newest = pythons.DEFAULT[-1], pythons.DEFAULT[0]
    assert f"need Python {oldest} to {newest}" in output and f"uv python install {newest}" in output, output
    assert "skipped" not in output.lower(), output
    assert not (tmp_path / "nox" / "tests" / "bin").exists()  # nothing was installed
