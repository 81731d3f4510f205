"""harness/cli/progress.py: one line of steps done, of the total, and the time left; none off a terminal."""

from __future__ import annotations

import io

import pytest

from harness.cli import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_only_the_lines_are_printed():
    out = io.StringIO()
    with progress.Steps(3, "upgrade", file=out) as bar:
        bar.note("run pallas_flash")
        bar.done("baseline run pallas_flash: exit 0")
        bar.done()
    assert not bar.shown
    assert out.getvalue() == "baseline run pallas_flash: exit 0\n"


def test_on_a_terminal_the_line_says_done_of_total_and_the_time_left():
    out = Terminal()
    with progress.Steps(4, "upgrade", file=out) as bar:
        bar.note("bench")
        bar.done("step one")
        bar.done()
        assert bar.shown
    text = out.getvalue()
    assert "step one\n" in text
    # tqdm redraws the line with a carriage return; the last drawing before it is cleared:
    drawn = [part for part in text.replace("\n", "\r").split("\r") if part.startswith("upgrade:")]
    assert drawn[-1].startswith("upgrade: 2/4 steps [00:00<00:00") and drawn[-1].endswith("], bench")


def test_quiet_draws_nothing_on_a_terminal_either():
    out = Terminal()
    with progress.Steps(2, "findings", file=out, quiet=True) as bar:
        bar.done()
    assert out.getvalue() == ""


def test_a_negative_total_is_refused():
    with pytest.raises(ValueError, match="total=-1 must be 0 or more steps"):
        progress.Steps(-1, "bisect")
