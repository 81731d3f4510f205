"""One progress line for a command that runs for minutes: steps done of the total, and the time left.

    with progress.Steps(total, "upgrade") as bar:
        upgrade.run_all(..., log=bar.done)   # each finished step's line printed above the bar, the bar moved on

tqdm draws the line (its estimate is the recent rate of steps, so a step far longer than the others shows
as a slower estimate, not a stall) and only on a terminal: with stdout a file or a pipe (CI, `| tee`) the
bar is off and the lines print as they would without it.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

# "upgrade: 5/34 steps [07:12<41:30]": what is done, of what, how long it took and the estimate of what is left.
FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}]{postfix}"


class Steps:
    """A progress line over `total` steps (on `file`, default stdout, when it is a terminal and not `quiet`)."""

    def __init__(
        self, total: int, what: str, *, unit: str = "steps", file: TextIO | None = None, quiet: bool = False
    ) -> None:
        if total < 0:
            raise ValueError(f"total={total} must be 0 or more steps")
        # Imported here, not with the CLI: a matrix cell installs the package without its dependencies
        # (harness.environments.matrix.COMMON) and runs `run`, which never draws a progress line.
        from tqdm import tqdm

        self.file = sys.stdout if file is None else file
        self.bar = tqdm(
            total=total,
            desc=what,
            unit=unit,
            file=self.file,
            bar_format=FORMAT,
            disable=quiet or not _is_terminal(self.file),
            dynamic_ncols=True,
            # Steps take minutes: each one is drawn at once, never held back by tqdm's redraw limit.
            mininterval=0,
            miniters=1,
            leave=False,
        )

    @property
    def shown(self) -> bool:
        """Whether the line is drawn (the file is a terminal)."""
        return not self.bar.disable

    def print(self, line: str) -> None:
        """A line of the command's own output, above the progress line."""
        if self.shown:
            self.bar.write(line, file=self.file)
        else:
            print(line, file=self.file, flush=True)

    def done(self, line: str | None = None, *, steps: int = 1) -> None:
        """`steps` more done, with the line that says how (printed above the progress line)."""
        if line is not None:
            self.print(line)
        self.bar.update(steps)

    def note(self, text: str) -> None:
        """What runs now, after the figures on the progress line."""
        self.bar.set_postfix_str(text, refresh=True)

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.bar.close()


def _is_terminal(file: TextIO) -> bool:
    try:
        return file.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without isatty
        return False
