"""Ending a harness process without the interpreter's teardown.

A process that imported jax and torch and ran a kernel spends one to two CPU seconds after its
last line freeing every module and object one by one (Py_FinalizeEx), work the operating system
does at once when the process ends. Workers and CLI processes are started by the hundred (a run
starts several, the test suite hundreds), so `exit_now` does what finalization does that matters
(waits for non-daemon threads by refusing to skip them, runs the atexit functions, flushes the
standard streams) and ends the process there.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with `code` after the atexit functions ran and stdout/stderr are flushed.

    While a non-daemon thread other than this one still runs, the interpreter's own exit (which
    waits for it) is used instead, so nothing a thread is writing is cut short.
    """
    # threading.enumerate() lists the running threads only.
    main = threading.main_thread()
    if threading.current_thread() is not main or any(t is not main and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()  # noqa: SLF001 - the interpreter's own list; os._exit skips it
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe or stream: nothing more to say
            pass
    os._exit(code)
