"""`python -m harness COMMAND ...`: exit 0 all pass, 1 a discrepancy or regression, 2 bad usage or input,
4 (`run`) nothing failed but a kernel cannot run in this environment (the interpreter's error is recorded)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
# `run`: no discrepancy, but some kernel cannot run here (Implementation.cannot_run): never a pass.
EXIT_CANNOT_RUN = 4


class UsageError(Exception):
    """Bad usage or input: printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every usage error
        raise UsageError(f"{self.prog}: {message}")


def _commands() -> dict[str, object]:
    import harness.commands as pkg

    mods = (importlib.import_module(f"harness.commands.{m.name}") for m in pkgutil.iter_modules(pkg.__path__))
    return {m.NAME: m for m in mods}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m harness", description="Differential and regression harness for attention kernels.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, mod in sorted(_commands().items()):
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args._main(args))
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_FAIL
