"""The one input-error type (bad usage or input: the CLI prints one line and exits 2), and
how any exception is shown in one line.

A leaf module (no harness imports) so that every layer can raise it: the case model, the store,
the gate and the commands. Each module's own error (CaseError, SpecError, FailureFileError, ...)
subclasses it, so `harness.cli.main` maps them all in one place instead of each command
converting them by hand.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad usage or input; the message is one line naming the bad value and the fix."""


def one_line(e: BaseException) -> str:
    """An exception as "Type: what happened", one line of at most 500 characters."""
    lines = str(e).strip().splitlines() or [""]
    # An error raised inside a jax callback (as the Pallas interpreter's out-of-bounds and
    # race errors are) arrives with the callback's traceback; its last line says what happened.
    line = lines[-1] if any("Traceback (most recent call last)" in x for x in lines) else lines[0]
    return f"{type(e).__name__}: {line.strip()}"[:500]
