"""`python -m harness COMMAND ...`: exit 0 all pass, 1 a discrepancy or regression, 2 bad usage or
input, 3 the harness itself failed (one line on stderr; the traceback saved to a file it names),
4 (`run`) nothing failed but a kernel cannot run in this environment (the interpreter's error is recorded)."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import pkgutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path

from harness.core import probes
from harness.core.contract import NotLoadedHere
from harness.core.errors import InputError
from harness.core.exit_codes import (  # noqa: F401 - the commands read them from here
    ENTRY,
    EXIT_CANNOT_RUN,
    EXIT_FAIL,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
)
from harness.environments import envs, matrix
from harness.running import probes as worker_probes
from harness.runtime import compat

# Bad usage or input, from any layer: one line, exit 2. envs and matrix import only the
# standard library (the noxfile loads them before the harness's dependencies are installed),
# so their errors cannot subclass InputError and are named here instead.
INPUT_ERRORS = (InputError, envs.EnvError, matrix.MatrixError)

CRASH_DIR_ENV = "ATTN_HARNESS_CRASH_DIR"


class UsageError(InputError):
    """Bad usage of the command line: printed as one line, exit 2 (as every InputError)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every usage error
        raise UsageError(f"{self.prog}: {message}")


def _commands() -> dict[str, object]:
    import harness.cli.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]  # _shared: not a command
    mods = (importlib.import_module(f"harness.cli.commands.{name}") for name in names)
    return {m.NAME: m for m in mods}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m harness", description="Differential and regression harness for attention kernels.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, mod in sorted(_commands().items()):
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    return parser


def save_traceback(exc: BaseException, argv: Sequence[str] | None) -> Path:
    """Write `exc`'s traceback to a new file and return its path.

    The directory is $ATTN_HARNESS_CRASH_DIR, else the system's temporary directory: the
    --out store may be the very thing that failed (full disk, no permission).
    """
    directory = Path(os.environ.get(CRASH_DIR_ENV) or tempfile.gettempdir())
    directory.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    fd, name = tempfile.mkstemp(prefix=f"harness-crash-{stamp}-", suffix=".txt", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(f"command: python -m harness {' '.join(argv if argv is not None else sys.argv[1:])}\n\n")
        f.write("".join(traceback.format_exception(exc)))
    return Path(name)


def _forget_handled_interrupts() -> None:
    """Keep the exit code main() chose when a Ctrl-C was handled on the way.

    CPython marks a KeyboardInterrupt raised inside exec() or eval() of a string (code that
    dataclasses, typing and Hypothesis build that way, where a signal can land) as unhandled
    even when it was caught, and `python -m` then ends the process with SIGINT (-2) after our
    exit code is chosen. Evaluating a string resets that mark (pythonrun.c, run_eval_code_obj).
    """
    exec("pass")  # noqa: S102 - the reset itself, see above


def main(argv: Sequence[str] | None = None) -> int:
    # Before a command imports jax: keep JAX off a TPU plugin that has no TPU to find (a process's
    # start, not `import harness`, decides its platforms).
    compat.default_platforms_env()
    try:
        # Every call of kernel code, an adapter's probe too, runs in a worker process the command survives.
        with probes.calling(worker_probes.in_worker):
            return _main(argv)
    finally:
        _forget_handled_interrupts()


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args._main(args))
    except NotLoadedHere as e:
        print(f"{e}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    except INPUT_ERRORS as e:
        line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"error: {line}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - any other exception is the harness's own failure
        try:
            where = f"traceback saved to {save_traceback(e, argv)}"
        except OSError as write_error:
            where = f"traceback not saved ({write_error.strerror or write_error})"
        line = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"harness failure: {type(e).__name__}: {line} ({where})", file=sys.stderr)
        return EXIT_HARNESS
