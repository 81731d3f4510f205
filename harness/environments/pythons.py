"""Which Python interpreters an environment can be built on, and where this machine has them.

A constraints file names the Pythons its pins install on ("# python: 3.12 3.13 3.14", `declared`);
DEFAULT is constraints/default.txt's (tests/test_pythons.py checks it against the installed
distributions' Requires-Python). A nox session runs on the newest of them installed here (`choose`);
where none is, the error says which to install and how (`missing`), never a silent skip. upgrade and
bisect build each side on the first Python its pins install on (`search_order`, `for_constraints`).

`find` looks where interpreters live on a machine: `pythonX.Y` on PATH (when it runs: pyenv's shims
run only the selected versions), and pyenv's and uv's installation directories.
This module imports only the standard library: the noxfile loads it before anything is installed.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _runs(exe: str | Path, version: str) -> str | None:
    """The interpreter's own path (a shim or a link resolved) when `exe` starts and is Python `version`
    (MAJOR.MINOR); None otherwise."""
    try:
        done = subprocess.run(
            [str(exe), "-c", "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split("\n")
    return lines[1].strip() or str(exe) if done.returncode == 0 and lines[0].strip() == version else None


def _candidates(version: str) -> Iterable[Path]:
    """Where an interpreter of `version` may be, most specific first."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        yield Path(sys.executable)
    on_path = shutil.which(f"python{version}")
    if on_path:
        yield Path(on_path)
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    yield from sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}"), key=_patch, reverse=True)
    uv_dir = (
        os.environ.get("UV_PYTHON_INSTALL_DIR")
        or Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "uv" / "python"
    )
    yield from sorted(Path(uv_dir).glob(f"cpython-{version}.*/bin/python{version}"), key=_patch, reverse=True)


def _patch(path: Path) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", str(path))
    return tuple(int(g) for g in m.groups()) if m else (0,)


@functools.cache
def find(version: str) -> str | None:
    """The path of an installed interpreter of `version` (MAJOR.MINOR) that runs, or None."""
    for exe in _candidates(version):
        if exe.exists() and (found := _runs(exe, version)):
            return found
    return None


def choose(versions: Sequence[str] | None = None) -> tuple[str, str] | None:
    """(version, path) of the newest of `versions` (default: DEFAULT) installed here, or None."""
    for version in sorted(DEFAULT if versions is None else versions, key=_key, reverse=True):
        exe = find(version)
        if exe:
            return version, exe
    return None


def installed(versions: Sequence[str] | None = None) -> dict[str, str]:
    """version -> path of each of `versions` (default: DEFAULT) installed here, newest first."""
    return {v: p for v in sorted(DEFAULT if versions is None else versions, key=_key, reverse=True) if (p := find(v))}


def missing(versions: Sequence[str] | None = None, *, what: str = "the default pins") -> str:
    """What to say when none of `versions` (default: DEFAULT) is installed: which to install, and how."""
    if not (versions or DEFAULT):
        return f"{DEFAULT_CONSTRAINTS} declares no Python: add a line '# python: 3.12 3.13'"
    ordered = sorted(DEFAULT if versions is None else versions, key=_key)
    span = ordered[0] if len(ordered) == 1 else f"{ordered[0]} to {ordered[-1]}"
    newest = ordered[-1]
    have = ", ".join(v for v in sorted({*KNOWN, *ordered}, key=_key) if find(v)) or "none"
    return (
        f"{what} need Python {span}, and none is installed here (found: {have}). Install one, e.g. "
        f"`uv python install {newest}`, `pyenv install {newest}`, or `apt-get install python{ordered[0]}` "
        "(Ubuntu 24.04, Debian 13), then run the command again."
    )


# A constraints file names the Pythons its pins install on in a comment line: "# python: 3.12 3.13 3.14".
_DECLARED = re.compile(r"^#\s*python:\s*(.+)$", re.MULTILINE)


def declared(constraints_text: str) -> tuple[str, ...]:
    """The Pythons a constraints file declares (its "# python: X.Y ..." line), newest first; () without one."""
    m = _DECLARED.search(constraints_text)
    if not m:
        return ()
    found = re.findall(r"\b3\.\d+\b", m.group(1))
    return tuple(sorted(set(found), key=_key, reverse=True))


DEFAULT_CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints" / "default.txt"
# The minor versions the default pins install on, newest first.
DEFAULT: tuple[str, ...] = declared(DEFAULT_CONSTRAINTS.read_text()) if DEFAULT_CONSTRAINTS.exists() else ()
# Every minor version an environment may be built on, oldest first: the default pins' and the older ones
# of the version matrix and the history cells (harness.environments.matrix).
KNOWN: tuple[str, ...] = tuple(sorted({"3.10", "3.11", *DEFAULT}, key=_key))


@functools.cache
def version_of(exe: str) -> str | None:
    """MAJOR.MINOR of the interpreter at `exe`, or None when it does not run."""
    try:
        done = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def search_order(first: str, versions: Sequence[str] = KNOWN) -> list[str]:
    """Interpreters to build an environment on, in the order to try them: `first` (a path), then the installed
    `versions` newer than it, oldest first (the smallest step from `first`), then the older ones, newest first."""
    mine = version_of(first)
    out = [first]
    if mine is None:
        return out + [p for v in sorted(versions, key=_key, reverse=True) if (p := find(v))]
    newer = sorted((v for v in versions if _key(v) > _key(mine)), key=_key)
    older = sorted((v for v in versions if _key(v) < _key(mine)), key=_key, reverse=True)
    return out + [p for v in (*newer, *older) if (p := find(v))]


def for_constraints(constraints_text: str, *, fallback: str = sys.executable) -> list[str]:
    """Interpreters to build a constraints file's environment on, in order: its declared Pythons installed here,
    newest first (as the nox sessions choose), then `fallback`'s search order."""
    chosen = [p for v in declared(constraints_text) if (p := find(v))]
    rest = [p for p in search_order(fallback) if p not in chosen]
    return chosen + rest
