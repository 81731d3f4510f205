"""Options and steps several commands share, defined once: --out, --kernel, resolving specs, the store.

Not a command itself (harness.cli skips modules whose names start with "_").
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.cli import UsageError
from harness.core import contract
from harness.store.files import RunStore

# Where run, compile, bench and leak write their records, and the kernel they check by default.
DEFAULT_STORE = Path("reports/store")
DEFAULT_KERNEL = "pallas_flash"
KERNEL_HELP = "built-in kernel name, MODULE:ATTR drop-in, or KERNEL=MODULE:ATTR"


def add_out(p: argparse.ArgumentParser, *, default: Path = DEFAULT_STORE, what: str = "results store") -> None:
    """--out DIR (or FILE, for a report), with its default named in the help."""
    metavar = "FILE" if default.suffix else "DIR"
    p.add_argument("--out", type=Path, default=default, metavar=metavar, help=f"{what} (default {default})")


def add_store(p: argparse.ArgumentParser) -> None:
    """--store DIR, repeatable: the stores a command reads (merged); `stores` reads it with the default applied."""
    help = f"results store to read (repeatable, stores merge; default {DEFAULT_STORE})"
    p.add_argument("--store", action="append", type=Path, metavar="DIR", help=help)


def stores(args: argparse.Namespace) -> list[Path]:
    """The --store directories given, else the default store."""
    return args.store or [DEFAULT_STORE]


def add_kernel(p: argparse.ArgumentParser) -> None:
    """--kernel K, repeatable; `kernel_specs` reads it with the default applied."""
    help = f"{KERNEL_HELP} (repeatable; default {DEFAULT_KERNEL})"
    p.add_argument("--kernel", action="append", metavar="K", help=help)


def kernel_specs(args: argparse.Namespace) -> list[str]:
    """The --kernel specs given, else the default kernel."""
    return args.kernel or [DEFAULT_KERNEL]


def resolve(specs: list[str], role: str) -> list[contract.Implementation]:
    """The implementations `specs` name; an unknown or broken one is bad input (exit 2)."""
    out = []
    for spec in specs:
        try:
            impl = contract.resolve(spec)
        except contract.UnknownImplementation:
            raise  # an InputError: its message names the spec and what exists
        except Exception as e:  # noqa: BLE001 - importing a MODULE:ATTR drop-in runs its code: bad input
            line = (str(e).strip().splitlines() or [""])[0]
            raise UsageError(f"--{role} {spec!r} failed to load: {type(e).__name__}: {line}; fix that module") from None
        if role == "oracle" and impl.role != "oracle":
            raise UsageError(f"--oracle {spec!r} is a {impl.role}; oracles: {contract.names('oracle')}")
        out.append(impl)
    return out


# Signals received during the run. The handler's KeyboardInterrupt is lost when it lands in
# code that ignores exceptions (a garbage-collection callback of XLA's or Hypothesis's, measured):
# the run's next finished case then raises it again (harness.cli.commands.run), and nothing is printed.
SIGNALLED: list[int] = []
# A stop often comes twice: Ctrl-C reaches a `run --jobs` worker from the terminal and again as
# its parent's forwarded SIGTERM. A signal this soon after the last raised one is recorded, not raised,
# so the second cannot land in the first one's clean-up (later ones still interrupt a lost first).
REPEAT_S = 2.0


@contextlib.contextmanager
def interrupt_signals() -> Iterator[None]:
    """Ctrl-C and `kill` stop the run: the summary and run.json say interrupted.

    Installed whatever the run inherited: a background job of a non-interactive shell (and
    some CI agents) starts with SIGINT ignored, and Python then installs no handler of its own.
    """

    def handler(signum: int, frame: object) -> None:
        now = time.monotonic()
        again = bool(SIGNALLED) and now - last[0] < REPEAT_S
        SIGNALLED.append(signum)
        if not again:
            last[0] = now
            raise KeyboardInterrupt(f"signal {signum}")

    def unraisable(args: Any) -> None:
        # The handler's KeyboardInterrupt raised inside a garbage-collection callback (Hypothesis
        # times GC with one) cannot propagate: Python would print it as a traceback. It is already
        # recorded in SIGNALLED, and the run stops at its next finished case.
        if not (isinstance(args.exc_value, KeyboardInterrupt) and SIGNALLED):
            previous_hook(args)

    SIGNALLED.clear()
    last = [0.0]
    previous = {}
    previous_hook = sys.unraisablehook
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: leave signals alone
        pass
    if previous:
        sys.unraisablehook = unraisable
    try:
        yield
    finally:
        if previous:
            sys.unraisablehook = previous_hook
        if SIGNALLED and previous:
            # The run has stopped: what is left is its summary, run.json and the exit. A later
            # signal from here on would only cut that short (a KeyboardInterrupt traceback from
            # an exit handler: tests/test_run_interrupted.py fails without this block and passes
            # with it), so it is recorded and nothing more. Not blocked: a signal sent to the
            # process lands in any thread that does not block it, where the default action
            # would kill the run (a `run --jobs` worker whose parent died gets one per thread).
            for sig in previous:
                signal.signal(sig, lambda signum, frame: SIGNALLED.append(signum))
        else:
            for sig, old in previous.items():
                signal.signal(sig, old)


def create_store(out: Path, meta: dict, implementations: Iterable[str] | None = None) -> RunStore:
    """The run's store; an --out that cannot hold one is bad input (exit 2), said before any case runs.
    implementations: those the run checks, whose APIs run.json records (default: every registered one)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out={str(out)!r} is a file; give a directory (it is created if missing)")
    try:
        return RunStore.create(out, meta=meta, implementations=implementations)
    except OSError as e:
        raise UsageError(
            f"--out={str(out)!r} cannot be written ({e.strerror or e}); give a writable directory"
        ) from None
