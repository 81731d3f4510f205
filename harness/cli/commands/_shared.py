"""Options and steps several commands share, defined once: --out, --kernel, --store, the stop on a signal.

Resolving specs and creating the store are harness.running.session's, re-exported here for the other commands.

Not a command itself (harness.cli skips modules whose names start with "_").
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

# DEFAULT_STORE: where run, compile, bench and leak write their records; DEFAULT_KERNEL: what they check.
from harness.running.plan import DEFAULT_KERNEL, DEFAULT_STORE
from harness.running.session import resolve  # noqa: F401
from harness.running.sink import StopToken, create_store  # noqa: F401

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


# A stop often comes twice: Ctrl-C reaches a `run --jobs` worker from the terminal and again as
# its parent's forwarded SIGTERM. A signal this soon after the last raised one is recorded, not raised,
# so the second cannot land in the first one's clean-up (later ones still interrupt a lost first).
REPEAT_S = 2.0
# After a stop's KeyboardInterrupt was lost in a gc callback, when it is raised again: the main thread has left
# the callback by then (it takes microseconds), and one lost again comes back.
REDELIVER_S = 0.01


def _inside(frame: FrameType | None, code: CodeType) -> bool:
    """Whether `frame` runs `code` or is called from it."""
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _send_again(signum: int, wanted: Callable[[], bool]) -> None:
    """Send `signum` to the main thread again REDELIVER_S from now, from another thread (once the main
    thread has left the callback that lost it), if still `wanted()`. A signal, not
    `_thread.interrupt_main`: it also ends a wait (on the kernel's worker) at once."""

    def send() -> None:
        if wanted():
            signal.pthread_kill(threading.main_thread().ident, signum)

    again = threading.Timer(REDELIVER_S, send)
    again.daemon = True
    again.start()


def _after(stop: StopToken, previous: dict[int, Any]) -> None:
    """The handlers once the run is over: its own again, or, after a stop, handlers that only record.

    After a stop, what is left is the run's summary, run.json and the exit. A later signal from
    there on would only cut that short (a KeyboardInterrupt traceback from an exit handler:
    tests/test_run_interrupted.py fails without this and passes with it), so it is recorded and
    nothing more. Not blocked: a signal sent to the process lands in any thread that does not block
    it, where the default action would kill the run (a `run --jobs` worker whose parent died gets one
    per thread).
    """
    if stop.requested() and previous:
        for sig in previous:
            signal.signal(sig, lambda signum, frame: stop.request(signum))
    else:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def interrupt_signals(stop: StopToken | None = None) -> Iterator[StopToken]:
    """Ctrl-C and `kill` stop the run: `stop` records each signal, and the first raises KeyboardInterrupt.

    The handler's KeyboardInterrupt is lost when it lands in code that cannot raise (a
    garbage-collection callback of Hypothesis's, measured): the signal is then sent to the main
    thread again, else the run would go on until its next finished case sees the token
    (harness.running.session), the whole of a slow case later.
    Installed whatever the run inherited: a background job of a non-interactive shell (and some CI
    agents) starts with SIGINT ignored, and Python then installs no handler of its own.
    """
    stop = StopToken() if stop is None else stop
    last = [0.0]

    def handler(signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        # Once a stopped run has settled (only its summary and run.json are left), a signal is recorded only.
        quiet = stop.requested() and (stop.settled or now - last[0] < REPEAT_S)
        stop.request(signum)
        if _inside(frame, unraisable.__code__):  # raised there, it would be lost for good
            again(signum)
        elif not quiet:
            last[0] = now
            raise KeyboardInterrupt(f"signal {signum}")

    def unraisable(args: Any) -> None:
        # The handler's KeyboardInterrupt raised inside a garbage-collection callback (Hypothesis
        # times GC with one) cannot propagate: Python would print it as a traceback. The signal is
        # sent again, and the handler raises it wherever the main thread is then.
        if not (isinstance(args.exc_value, KeyboardInterrupt) and stop.requested()):
            previous_hook(args)
        elif not stop.settled:
            again(stop.signals[-1])

    def again(signum: int) -> None:
        last[0] = 0.0  # not a repeat: the one raised was lost
        _send_again(signum, lambda: not stop.settled and bool(previous))

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
        yield stop
    finally:
        if previous:
            sys.unraisablehook = previous_hook
        _after(stop, previous)
        previous.clear()  # a signal still to be sent again is not
