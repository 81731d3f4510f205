"""What the workers of `run --jobs` print, merged into the parent's one stream: one numbering, one summary.

Each worker writes its lines to a log of its own (processes.run_workers: LOGS_DIR/jobs-.../shard-I-of-N.log);
the parent reads them as they come and shows (Merge.line):

  a case line        renumbered over the whole run, "[k/TOTAL] ...": k counts the cases finished in every
                     shard, TOTAL the cases the run plans (every kernel's --examples, smoke cases among them)
  a kernel header    once, with the run's case count in place of the shard's
  a shard's summary  not at all: it stays in the shard's log, and the parent prints the merged one
  its records' place and its coverage: not at all (the parent's lines and merged summary say them)
  anything else      (an error, a warning, a traceback, a divergence) with "shard I/N: " before it; a line
                     another shard already showed is not shown again

and, after a case line, at most once every STATUS_EVERY_S, a status line: cases done of the total, those
failing so far, and an estimate of the time left.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from pathlib import Path

from harness.core.numbers import duration
from harness.running.jobs.shard import Shard

# A case line as harness.cli.console.progress_line writes it: "[ 3/10]  4.1s  k ok 0.1 | o ok 0.2  B=1 ...".
CASE_LINE = re.compile(r"\[\s*(\d+)/(\d+)\](.*)", re.DOTALL)
# A worker prints this line before its own summary (harness.cli.commands.run): what follows stays in its log.
SUMMARY_HEADER = "== summary of shard"
# Lines each worker prints about itself that the parent's own lines or merged summary already say.
LOG_ONLY = ("results -> ", "   pairwise coverage of declared features")
# Lines about the run, not the shard: shown once, as the first worker to print them wrote them.
ABOUT_THE_RUN = ("== ", "references (", "   no TPU attached")
# A kernel header's count of cases (harness.running.session._say_kernel): the shard's, replaced by the run's.
HEADER_COUNT = re.compile(r", up to \d+ cases,")
# Often enough that a run of minutes says several times how long it has left; seldom enough that a
# long run's log is its case lines, not its status lines.
STATUS_EVERY_S = 30.0


def summary_header(shard: Shard) -> str:
    """The line a worker of `run --jobs` prints before its own summary."""
    return f"{SUMMARY_HEADER} {shard} alone (the run's parent prints the merged summary of every shard)"


def log_name(shard: Shard) -> str:
    """The file a worker's output goes to, in the run's log folder."""
    return f"shard-{shard.index}-of-{shard.count}.log"


def log_dir(out: Path, pid: int, now: float) -> Path:
    """The folder of one `run --jobs`'s worker logs in the store `out`: one per run (its start and its pid)."""
    return out / "logs" / f"jobs-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}-{pid}"


@dataclasses.dataclass(kw_only=True)
class Merge:
    """The parent's one stream over the lines of `jobs` workers, each shown through `show`."""

    jobs: int
    kernel_cases: int  # the cases the run plans for each kernel, all shards together
    kernels: int  # how many kernels each worker checks in turn
    show: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    done: int = 0  # cases finished, in every shard
    failing: int = 0  # of them, those a kernel failed
    # The pace is timed from the first line a worker prints: from the parent's own start (its probes, the
    # workers' imports) every estimate would be too long.
    _start: float | None = dataclasses.field(init=False, default=None)
    _last_status: float = dataclasses.field(init=False, default=0.0)
    _shown: dict[str, int] = dataclasses.field(init=False, default_factory=dict)  # each line shown: who said it
    _in_summary: set[int] = dataclasses.field(init=False, default_factory=set)  # shards whose summary has begun

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.kernel_cases < 0 or self.kernels < 0:
            raise ValueError(
                f"expected jobs >= 1 and counts >= 0, got {self.jobs=}, {self.kernel_cases=}, {self.kernels=}"
            )

    @property
    def total(self) -> int:
        """The cases the run plans, every kernel and shard together."""
        return self.kernel_cases * self.kernels

    def say(self, line: str) -> None:
        """A line of the parent's own: shown, and not shown again when a worker prints it too."""
        self._shown.setdefault(line, -1)
        self.show(line)

    def line(self, shard: int, line: str) -> None:
        """One line that worker `shard` printed: shown as the stream has it, or left to the worker's log."""
        if self._start is None:
            self._start = self._last_status = self.clock()
        if shard in self._in_summary:
            return
        if line.startswith(SUMMARY_HEADER):
            self._in_summary.add(shard)
            return
        if (case := CASE_LINE.match(line)) is not None:
            self._case(case.group(3))
            return
        if line.startswith(LOG_ONLY):
            return
        about_the_run = line.startswith(ABOUT_THE_RUN)
        if about_the_run:
            line = HEADER_COUNT.sub(f", up to {self.kernel_cases} cases,", line, count=1)
        if self._shown.setdefault(line, shard) == shard:
            self.show(line if about_the_run else f"shard {shard}/{self.jobs}: {line}")

    def _case(self, rest: str) -> None:
        self.done += 1
        self.failing += _fails(rest)
        total = max(self.total, self.done)
        self.show(f"[{self.done:>{len(str(total))}}/{total}]{rest}")
        now = self.clock()
        if now - self._last_status >= STATUS_EVERY_S:
            self._last_status = now
            self.show(self.status(now))

    def status(self, now: float) -> str:
        """Cases done of the total, failing so far, time spent and (at the pace so far) left."""
        spent = now - (now if self._start is None else self._start)
        left = spent / self.done * max(self.total - self.done, 0) if self.done else None
        estimate = f"about {duration(left)} left" if left is not None else "no estimate yet"
        return f"-- {self.done}/{self.total} cases, {self.failing} failing, {duration(spent)} so far, {estimate}"


def _fails(rest: str) -> bool:
    """Whether a kernel failed the case of a case line (its text after the index): a subject's verdict FAIL."""
    # "  4.1s  k FAIL | o ok 0.1  B=1 ...": seconds, verdicts, case, two spaces apart.
    fields = rest.strip().split("  ")
    verdicts = fields[1] if len(fields) > 1 else ""
    return any(part.split(" ")[1:2] == ["FAIL"] for part in verdicts.split(" | "))
