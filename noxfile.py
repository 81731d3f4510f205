"""Sessions: `nox -l` lists them. Each installs what it needs into its own virtualenv."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]

PYTHON = "3.11"
DEFAULT_CONSTRAINTS = "constraints/default.txt"


def install(session: nox.Session, *extras: str, constraints: str = DEFAULT_CONSTRAINTS) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-c", constraints, "-e", spec)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The harness's own test suite (fast; runs kernels under the TPU interpreter)."""
    install(session, "test")
    session.run("ruff", "check", "harness", "kernels", "oracles", "tests", "noxfile.py")
    session.run("pytest", *session.posargs, env={"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"})


@nox.session(python=PYTHON)
def tpu(session: nox.Session) -> None:
    """The main job: the differential suite on a TPU, else under the Pallas TPU interpreter."""
    install(session)
    session.run("python", "-m", "harness", "run", *session.posargs)
