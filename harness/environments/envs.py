"""Building and caching virtual environments with uv, for `upgrade` and `bisect`.

An environment is described by an `EnvSpec`: an interpreter, requirements, a constraints
file's text, projects installed editable, and where packages come from (`IndexOptions`).
The spec hashes to a directory under the cache root, so each distinct environment is built
once and reused; a build that did not finish is never reused (the `.complete` marker is
written last).

Companions are the resolver's business, never hand-edited: a candidate pins `jax[tpu]==X`
and uv picks the jaxlib and libtpu that release requires.

Package sources: uv does not read pip's configuration, so `IndexOptions.from_pip()` reads
it (`pip config list`: index-url, extra-index-url, find-links, no-index, constraint, from
the environment or pip's config files) at run time, and the same options are given to
both pip (listing versions) and uv (installing). Nothing here names a host or a path.

This module imports only the standard library: the noxfile and the bisect tests use it
before anything else is installed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

UV_REQUIREMENT = "uv==0.13.9"
COMPLETE = ".complete"
LEFT_OUT = "left_out.json"
# Packages an environment goes without where they cannot install beside the release under test, so
# that upgrade and bisect reach every release: tokamax needs jax >= 0.9.2 (its package metadata); a
# kernel it provides is then not registered there, "cannot run here" on that side.
OPTIONAL_PACKAGES = ("tokamax",)


class EnvError(Exception):
    """An environment that cannot be built: one line naming the requirement that failed and why.

    `wrong_python`: the pins install on another Python than the one tried (requires-python, or no wheel
    for its version): `build_first` tries the next interpreter."""

    def __init__(self, message: str, *, wrong_python: bool = False) -> None:
        super().__init__(message)
        self.wrong_python = wrong_python


# What uv says when a requirement needs another Python: its Requires-Python ("the current Python version
# (3.11.7) does not satisfy Python>=3.12"), or no wheel for this version ("has no wheels with a matching
# Python implementation tag (e.g., `cp311`)").
_WRONG_PYTHON = re.compile(r"current Python version|matching Python (?:version|implementation|ABI) tag")


def wrong_python(failure: str) -> bool:
    """Whether a resolver failure says the requirements need another Python version."""
    return bool(_WRONG_PYTHON.search(failure))


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attention-harness" / "envs"


# Set in this process's environment by jax when it loads its own libtpu (jax._src.cloud_tpu_init): inherited by a
# process of another environment, it makes that one compile with this environment's libtpu, whatever it installed.
_INHERITED_LIBRARIES = ("TPU_LIBRARY_PATH",)


def side_env(**extra: str) -> dict[str, str]:
    """The environment for a process that runs in another built environment: this one's, without the
    library paths this process's own packages set, so the other uses its own libtpu."""
    return {**{k: v for k, v in os.environ.items() if k not in _INHERITED_LIBRARIES}, **extra}


def _clean_env(**extra: str) -> dict[str, str]:
    """The process environment without pip's and uv's own settings: only the options we pass apply."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **extra}


@dataclasses.dataclass(frozen=True, kw_only=True)
class IndexOptions:
    """Where packages come from, as pip's options name them."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    constraints: tuple[str, ...] = ()  # constraint files pip applies to every install

    @classmethod
    def from_pip(cls, python: str = sys.executable) -> IndexOptions:
        """pip's configuration as `pip config list` shows it (environment variables first, then install, global)."""
        try:
            out = subprocess.run(
                [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True, timeout=60
            ).stdout
        except (OSError, subprocess.SubprocessError) as e:
            raise EnvError(f"cannot read pip's configuration with {python} -m pip config list: {e}") from None
        return cls.from_config_lines(out.splitlines())

    @classmethod
    def from_config_lines(cls, lines: list[str]) -> IndexOptions:
        values: dict[tuple[str, str], str] = {}
        for line in lines:
            m = re.fullmatch(r"([^.=]*)\.([A-Za-z0-9_-]+)='(.*)'", line.strip())
            if m:
                values[(m.group(1), m.group(2).replace("_", "-"))] = m.group(3)

        def get(key: str) -> str | None:
            for section in (":env:", "install", "global"):  # pip's precedence for `pip install`
                if (section, key) in values:
                    return values[(section, key)]
            return None

        split = lambda v: tuple(v.split()) if v else ()  # noqa: E731 - pip splits these on whitespace
        no_index = (get("no-index") or "").lower() in ("1", "true", "yes", "on")
        return cls(
            index_url=get("index-url"),
            extra_index_urls=split(get("extra-index-url")),
            find_links=split(get("find-links")),
            no_index=no_index,
            constraints=split(get("constraint")),
        )

    def args(self, *, constraints: bool = True) -> list[str]:
        """Options for `pip install` and `uv pip install` alike (`pip index` takes no constraints)."""
        out = ["--index-url", self.index_url] if self.index_url else []
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        for link in self.find_links:
            out += ["--find-links", link]
        if self.no_index:
            out.append("--no-index")
        for c in self.constraints if constraints else ():
            out += ["--constraint", c]
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """One environment: what is installed, from where."""

    python: str  # an interpreter path (or a version uv can find)
    requirements: tuple[str, ...]
    index: IndexOptions
    constraints: str = ""  # a constraints file's text
    editable: tuple[str, ...] = ()  # project directories installed with -e --no-deps
    label: str = ""  # for messages: what this environment is (e.g. "candidate jax==0.9.2")

    def key(self) -> str:
        data = dataclasses.asdict(self)
        data.pop("label")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Env:
    path: Path
    spec: EnvSpec

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def installed(self) -> dict[str, str]:
        """name -> version of every distribution in the environment, as recorded when it was built."""
        return json.loads((self.path / "installed.json").read_text())

    def left_out(self) -> dict[str, str]:
        """requirement -> why: what the spec asked for that could not install beside the rest (LEAVE_OUT)."""
        path = self.path / LEFT_OUT
        return json.loads(path.read_text()) if path.exists() else {}  # none in environments built before the file


def uv_binary() -> str:
    """uv on PATH, else the one the `uv` package installed beside this interpreter."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if found:
        return found
    try:
        import uv  # type: ignore[import-not-found]

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        raise EnvError(f"uv is not installed: pip install {UV_REQUIREMENT} (the test extra has it)") from None


def resolution_failure(stderr: str) -> str:
    """The line of uv's (or pip's) error output that says which requirement failed, and why."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        m = re.match(r"(?:cause:\s*)?(Because .*)", ln.removeprefix("╰─▶").strip())
        if m:
            # uv wraps a long reason over several lines (the rest indented): the sentence is all of them.
            rest = itertools.takewhile(lambda x: not re.match(r"(hint|help|error|warning):|[×╰]", x), lines[i + 1 :])
            return " ".join([m.group(1), *(x.removeprefix("│").strip() for x in rest)])
    for ln in lines:
        if ln.startswith(("error:", "ERROR:", "×")) and "No solution found" not in ln:
            return ln.removeprefix("error:").removeprefix("ERROR:").strip()
    return lines[-1] if lines else "no error output"


Runner = Callable[[list[str]], subprocess.CompletedProcess]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=_clean_env())


# A release's companions, resolved by the installer, never pinned by hand: jax[tpu]==X pins
# the jaxlib and libtpu that release was built and tested with.
COMPANIONS: dict[str, tuple[str, tuple[str, ...]]] = {"jax": ("jax[tpu]", ("jaxlib", "libtpu"))}


def _name(requirement: str) -> str:
    return re.split(r"[\[=<>!~; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pinned(constraints_text: str) -> dict[str, str]:
    """name -> requirement line of every pin in a constraints file (constraints/default.txt)."""
    lines = (ln.split("#", 1)[0].strip() for ln in constraints_text.splitlines())
    return {_name(ln): ln for ln in lines if ln}


def requirements_with(constraints_text: str, changes: dict[str, str]) -> tuple[str, ...]:
    """Every pin of `constraints_text` with each package of `changes` at its new version, companions resolved.

    changes: name -> version. A package that is not pinned there is added. Raises EnvError for a
    companion named twice (jaxlib follows jax, and is never set by hand beside it).
    """
    pins = pinned(constraints_text)
    out = dict(pins)
    for name, version in changes.items():
        name = _name(name)
        extra, companions = COMPANIONS.get(name, (name, ()))
        for c in companions:
            if c in changes:
                raise EnvError(f"{c} follows {name}: set only {name}=={version} and the installer picks its {c}")
            out.pop(c, None)
        out[name] = f"{extra}=={version}"
    return tuple(out.values())


def build(spec: EnvSpec, root: Path | str | None = None, *, log: Callable[[str], None] = print) -> Env:
    """The environment for `spec`, built with uv under `root` (default: the user cache) or reused from there."""
    root = Path(root) if root is not None else default_cache()
    path = root / spec.key()
    env = Env(path, spec)
    if (path / COMPLETE).exists():
        log(f"env {spec.label or spec.key()}: reusing {path}")
        return env
    uv = uv_binary()
    if path.exists():
        shutil.rmtree(path)  # an earlier build that did not finish
    path.mkdir(parents=True)
    what = spec.label or " ".join(spec.requirements)
    made = _run([uv, "venv", "--quiet", "--python", spec.python, str(path)])
    if made.returncode != 0:
        raise EnvError(
            f"cannot create the {what} environment with python {spec.python}: {resolution_failure(made.stderr)}"
        )
    base = [uv, "pip", "install", "--python", str(env.python), "--index-strategy", "unsafe-best-match"]
    base += spec.index.args()
    if spec.constraints:
        (path / "constraints.txt").write_text(spec.constraints)
        base += ["--constraint", str(path / "constraints.txt")]
    left_out = _install(base, spec.requirements, what, log=log)
    (path / LEFT_OUT).write_text(json.dumps(left_out, indent=1, sort_keys=True))
    for project in spec.editable:
        done = _run(base + ["--no-deps", "--editable", project])
        if done.returncode != 0:
            raise EnvError(f"cannot install {project} into the {what} environment: {resolution_failure(done.stderr)}")
    listed = _run([uv, "pip", "list", "--python", str(env.python), "--format", "json"])
    installed = {d["name"].lower(): d["version"] for d in json.loads(listed.stdout or "[]")}
    (path / "installed.json").write_text(json.dumps(installed, indent=1, sort_keys=True))
    (path / "spec.json").write_text(json.dumps(dataclasses.asdict(spec), indent=1, sort_keys=True))
    (path / COMPLETE).write_text("")
    return env


def build_first(
    spec: EnvSpec, pythons: list[str], root: Path | str | None = None, *, log: Callable[[str], None] = print
) -> Env:
    """The environment for `spec` on the first of `pythons` (interpreter paths) its requirements install on:
    a release that needs a newer Python (jax >= 0.11 needs 3.12) is built on one that has it. EnvError when
    none does, naming each Python tried and why; any other failure at once."""
    tried = []
    for python in dict.fromkeys(pythons):
        try:
            return build(dataclasses.replace(spec, python=python), root, log=log)
        except EnvError as e:
            if not e.wrong_python:
                raise
            log(f"env {spec.label or spec.key()}: not on {python}: {e}")
            tried.append(python)
    what = spec.label or " ".join(spec.requirements)
    raise EnvError(
        f"cannot build the {what} environment on any Python installed here (tried {', '.join(tried) or 'none'}): "
        "each needs another Python version; install the one its packages require (uv python install 3.X)"
    )


def leave_out(requirements: tuple[str, ...], failure: str) -> tuple[tuple[str, ...], str] | None:
    """`requirements` less what the resolver's `failure` names that an environment may go without, and what
    was left out; None when it names nothing optional. jax[tpu]==X becomes jax==X and jaxlib==X: jax[tpu]
    0.4.30 to 0.5.0 pin a libtpu-nightly that no index serves any more."""
    for req in requirements:
        name = _name(req)
        if name in OPTIONAL_PACKAGES and name in failure:
            return tuple(r for r in requirements if r != req), req
        if req.startswith("jax[tpu]==") and "libtpu" in failure:
            version = req.split("==", 1)[1]
            rest = tuple(r for r in requirements if r != req)
            return (*rest, f"jax=={version}", f"jaxlib=={version}"), f"the [tpu] extra of jax=={version}"
    return None


def _install(
    base: list[str], requirements: tuple[str, ...], what: str, *, log: Callable[[str], None]
) -> dict[str, str]:
    """Install `requirements` with the uv command `base`, leaving out (leave_out) what cannot install beside the
    rest, one at a time, each said in the log; returns requirement -> why for each left out."""
    left_out: dict[str, str] = {}
    while requirements:
        log(f"env {what}: uv {shlex.join(base[1:] + list(requirements))}")
        done = _run(base + list(requirements))
        if done.returncode == 0:
            break
        failure = resolution_failure(done.stderr)
        # Another Python first: leaving a package out is for what cannot install beside the release at all.
        fewer = None if wrong_python(failure) else leave_out(requirements, failure)
        if fewer is None:
            raise EnvError(f"cannot build the {what} environment: {failure}", wrong_python=wrong_python(failure))
        requirements, dropped = fewer
        left_out[dropped] = failure
        log(f"env {what}: left out {dropped}, which cannot install beside it: {failure}")
    return left_out


def available_versions(
    package: str, index: IndexOptions, *, python: str = sys.executable, python_version: str | None = None
) -> list[str]:
    """The released versions of `package` the index offers this interpreter, oldest first (pip's order, reversed).

    With `python_version` (MAJOR.MINOR), those with a wheel for that Python instead, whatever their
    Requires-Python says of this one: pip hides from a Python 3.11 every jax release that needs 3.12."""
    cmd = [python, "-m", "pip", "index", "versions", package, *index.args(constraints=False)]
    if python_version:
        cmd += ["--python-version", python_version, "--only-binary=:all:"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_clean_env())
    m = re.search(r"^Available versions: (.*)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not m:
        raise EnvError(f"no released versions of {package} found: {resolution_failure(done.stderr or done.stdout)}")
    return [v.strip() for v in m.group(1).split(",")][::-1]


def resolution(requirements: tuple[str, ...], python: str, index: IndexOptions, *, constraints: str = "") -> str | None:
    """Why `requirements` cannot install together on the interpreter `python` ("Because libtpu==0.0.53.* ..."),
    or None when they can: uv resolves them against the index without installing anything."""
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp) / "requirements.in"
        reqs.write_text("\n".join(requirements) + "\n")
        cmd = [uv_binary(), "pip", "compile", "--quiet", "--no-header", "--python", python, str(reqs)]
        cmd += ["--index-strategy", "unsafe-best-match", *index.args()]
        if constraints:
            (Path(tmp) / "constraints.txt").write_text(constraints)
            cmd += ["--constraint", str(Path(tmp) / "constraints.txt")]
        done = _run(cmd)
    return None if done.returncode == 0 else resolution_failure(done.stderr)
