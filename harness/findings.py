"""The findings catalogue: each note in docs/findings/ and docs/divergences/ with its metadata and script.

A note is Markdown that opens with a TOML block between two `+++` lines:

    +++
    title = "one line"
    kind = "bug"                  # bug | limitation | convention
    component = "jax.experimental.pallas.ops.tpu.splash_attention"
    condition = "the exact condition under which it shows"
    script = "name.py"            # beside the note; jax, numpy and the standard library only
    timeout_s = 120               # the script's limit here
    introduced = "jax 0.4.24 (598b46aab5, splash open-sourced)"
    fixed_in = ""                 # the release that fixed it upstream, "" while it is open
    upstream = ["jax-ml/jax#21371: ..."]   # issues and PRs that touch it; [] with upstream_searched
    upstream_searched = "..."     # what was searched when upstream is empty
    draft = "the title of the draft report or PR in the body"

    [releases]                    # measured, per jax release: "shows" | "fixed" | "cannot run"
    "0.10.2" = "shows"

    [fix]                         # a bug's (or a limitation's) fix the harness proves (`nox -s findings`)
    fixed = "pallas_splash=docs.findings.fixes.splash_backward_nan:make_splash"
    unfixed = "pallas_splash"
    case = "fixes/splash_backward_nan.json"   # a failure file of the shrunk case, found with `unfixed`
    run = ["--examples", "4", "--seed", "0"]  # a full run: `fixed` must pass it
    unfixed_run = "fails"                     # measured: the same run on `unfixed` fails ("fails"), does
                                              # not meet the bug at that budget ("passes"), or cannot run
                                              # at all ("cannot run", exit 4)
    unfixed_env = { NAME = "value" }          # optional: set for the `unfixed` steps only (a fix that
                                              # is not a kernel: the switch that leaves it out)
    upstream = "jax-ml/jax#32357"             # instead of the above, for a bug fixed upstream
    +++

A script exits 1 while the installed versions still show the finding, 0 once they do not, and
4 (harness.core.exit_codes.EXIT_CANNOT_RUN) when it cannot run here (a package or device it needs
is missing). A script that raises is "script failed" (it runs inside WRAPPER, so a crash is not read as
exit 1). Standard library only, so that listing needs no kernel import.
"""

from __future__ import annotations

import dataclasses
import enum
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from harness.core.errors import InputError
from harness.core.exit_codes import EXIT_CANNOT_RUN

ROOT = Path(__file__).resolve().parent.parent
DIRS = (ROOT / "docs" / "findings", ROOT / "docs" / "divergences")
KINDS = ("bug", "limitation", "convention")
MEASURED = ("shows", "fixed", "cannot run")
FENCE = "+++"
FIX_PROOF = ("fixed", "unfixed", "case", "run", "unfixed_run")
UNFIXED_RUN = ("fails", "passes", "cannot run")
# Output kept from a script for the status line: its last line says what it saw.
TAIL_LINES = 1
# Exit code of a script that raised: Python would exit 1, which reads as "still shows it", so the
# script runs inside this wrapper (as the CLI runs inside harness.core.exit_codes.ENTRY).
CRASHED = 3
WRAPPER = (
    "import runpy, sys, traceback\n"
    "sys.argv = sys.argv[1:]\n"
    "try:\n"
    "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "except SystemExit:\n"
    "    raise\n"
    "except BaseException:\n"
    "    traceback.print_exc()\n"
    f"    sys.exit({CRASHED})\n"
)


class FindingError(InputError):
    """A note whose metadata is missing or malformed; one line naming the file and the field."""


class Status(enum.Enum):
    SHOWS = "still shows it"
    FIXED = "fixed since"
    CANNOT_RUN = "cannot run here"
    BROKEN = "script failed"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fix:
    """How a bug is fixed: upstream (`upstream`), or by source edits the harness proves (the rest)."""

    fixed: str = ""
    unfixed: str = ""
    case: Path | None = None
    run: tuple[str, ...] = ()
    unfixed_run: str = ""
    unfixed_env: dict[str, str] = dataclasses.field(default_factory=dict)
    upstream: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finding:
    name: str
    note: Path
    title: str
    kind: str
    component: str
    condition: str
    script: Path
    timeout_s: float
    introduced: str
    fixed_in: str
    upstream: tuple[str, ...]
    upstream_searched: str
    draft: str
    releases: dict[str, str]
    fix: Fix | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScriptResult:
    finding: Finding
    status: Status
    returncode: int | None
    seconds: float
    detail: str


def _str(path: Path, meta: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = meta.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise FindingError(f'{path}: front matter needs {key} = "..." (a non-empty string), got {value!r}')
    return value.strip()


def front_matter(path: Path) -> tuple[dict[str, Any], str]:
    """The TOML block a note opens with, and the Markdown after it."""
    text = path.read_text()
    lines = text.splitlines()
    if not lines or lines[0].strip() != FENCE or FENCE not in (x.strip() for x in lines[1:]):
        raise FindingError(f"{path}: a note must open with a TOML block between two {FENCE!r} lines")
    end = next(i for i, x in enumerate(lines[1:], 1) if x.strip() == FENCE)
    try:
        meta = tomllib.loads("\n".join(lines[1:end]))
    except tomllib.TOMLDecodeError as e:
        raise FindingError(f"{path}: front matter is not TOML: {e}") from None
    return meta, "\n".join(lines[end + 1 :])


def _fix(path: Path, meta: dict[str, Any]) -> Fix | None:
    raw = meta.get("fix")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise FindingError(f"{path}: [fix] must be a table")
    if raw.get("upstream"):
        return Fix(upstream=_str(path, raw, "upstream"))
    missing = [k for k in FIX_PROOF if not raw.get(k)]
    if missing:
        raise FindingError(f"{path}: [fix] needs upstream, or all of {FIX_PROOF}; missing {missing}")
    run = raw["run"]
    if not (isinstance(run, list) and all(isinstance(a, str) for a in run)):
        raise FindingError(f"{path}: [fix] run must be a list of strings (harness run arguments), got {run!r}")
    case = path.parent / _str(path, raw, "case")
    if not case.is_file():
        raise FindingError(f"{path}: [fix] case {case} does not exist")
    if raw["unfixed_run"] not in UNFIXED_RUN:
        raise FindingError(f"{path}: [fix] unfixed_run={raw['unfixed_run']!r} must be one of {UNFIXED_RUN}")
    env = raw.get("unfixed_env", {})
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise FindingError(f'{path}: [fix] unfixed_env must be a table of strings (NAME = "value"), got {env!r}')
    return Fix(
        fixed=_str(path, raw, "fixed"),
        unfixed=_str(path, raw, "unfixed"),
        case=case.resolve(),
        run=tuple(run),
        unfixed_run=raw["unfixed_run"],
        unfixed_env=dict(env),
    )


def load(path: Path) -> Finding:
    """The finding a note describes; FindingError (one line) for anything missing or malformed."""
    meta, _ = front_matter(path)
    kind = _str(path, meta, "kind")
    if kind not in KINDS:
        raise FindingError(f"{path}: kind={kind!r} must be one of {KINDS}")
    script = path.parent / _str(path, meta, "script")
    if not script.is_file():
        raise FindingError(f"{path}: script {script} does not exist")
    releases = meta.get("releases", {})
    if not releases or any(v not in MEASURED for v in releases.values()):
        raise FindingError(f"{path}: [releases] needs at least one measured release, each one of {MEASURED}")
    upstream = meta.get("upstream", [])
    searched = _str(path, meta, "upstream_searched", required=not upstream)
    fix = _fix(path, meta)
    if kind == "bug" and fix is None:
        raise FindingError(f"{path}: a bug needs a [fix] table (upstream = PR, or a fix the harness proves)")
    timeout = meta.get("timeout_s", 120)
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise FindingError(f"{path}: timeout_s={timeout!r} must be a positive number of seconds")
    return Finding(
        name=path.stem,
        note=path,
        title=_str(path, meta, "title"),
        kind=kind,
        component=_str(path, meta, "component"),
        condition=_str(path, meta, "condition"),
        script=script,
        timeout_s=float(timeout),
        introduced=_str(path, meta, "introduced"),
        fixed_in=_str(path, meta, "fixed_in", required=False),
        upstream=tuple(upstream),
        upstream_searched=searched,
        draft=_str(path, meta, "draft"),
        releases=dict(releases),
        fix=fix,
    )


def catalogue(dirs: tuple[Path, ...] = DIRS) -> list[Finding]:
    """Every note with front matter in `dirs` (READMEs are indexes, not findings), by name."""
    notes = sorted(p for d in dirs for p in d.glob("*.md") if p.name != "README.md")
    return sorted((load(p) for p in notes), key=lambda f: f.name)


def status_of(returncode: int) -> Status:
    if returncode == 1:
        return Status.SHOWS
    if returncode == 0:
        return Status.FIXED
    if returncode == EXIT_CANNOT_RUN:
        return Status.CANNOT_RUN
    return Status.BROKEN


def _last_line(text: str) -> str:
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return " / ".join(lines[-TAIL_LINES:])[:300]


def run_script(finding: Finding, *, timeout_s: float | None = None) -> ScriptResult:
    """Run the finding's script on the installed versions, in a child process with this environment."""
    limit = timeout_s or finding.timeout_s
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", WRAPPER, str(finding.script)],
            capture_output=True,
            text=True,
            timeout=limit,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return ScriptResult(
            finding=finding,
            status=Status.BROKEN,
            returncode=None,
            seconds=time.perf_counter() - start,
            detail=f"no result within {limit:g} s",
        )
    detail = _last_line(done.stdout if done.returncode in (0, 1, EXIT_CANNOT_RUN) else done.stderr or done.stdout)
    return ScriptResult(
        finding=finding,
        status=status_of(done.returncode),
        returncode=done.returncode,
        seconds=time.perf_counter() - start,
        detail=detail,
    )
