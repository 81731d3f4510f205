"""The workers' lines of `run --jobs` as one stream (harness.running.jobs.stream) and how the parent reads them
(harness.running.jobs.processes._Log). tests/test_shards.py runs a real `run --jobs 2` and checks its output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.running.jobs import processes, stream
from harness.running.jobs.shard import Shard

HEADER = "== k on cpu (cpu:0) vs o, up to {} cases, profile ci"


def _case(i: int, n: int, verdict: str = "ok 0.1") -> str:
    return f"[{i:>{len(str(n))}}/{n}]   0.4s  k {verdict} | o ok 0.2  B=1 H=1 L=16 D=32 float32 mask=none seed={i}"


def _shard(index: int, cases: int, *, verdicts: dict[int, str] | None = None) -> list[str]:
    """What worker `index` of two prints, checking `cases` cases of one kernel."""
    verdicts = verdicts or {}
    return [
        f"results -> store/records/run-{index}",
        "references (float64 truth, ruler, oracles) on cpu:0",
        HEADER.format(cases),
        *(_case(i, cases, verdicts.get(i, "ok 0.1")) for i in range(1, cases + 1)),
        f"   pairwise coverage of declared features in the first {cases} cases: 24%",
        stream.summary_header(Shard(index, 2)),
        "",
        "kernel  drawn failing",
        "[not a case line: the shard's summary]",
        "verdict: 0 bugs",
    ]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _merge(shown: list[str], clock: Clock | None = None, kernel_cases: int = 5) -> stream.Merge:
    return stream.Merge(jobs=2, kernel_cases=kernel_cases, kernels=1, show=shown.append, clock=clock or Clock())


def test_two_shards_lines_are_one_stream_with_one_numbering_and_no_shard_summary() -> None:
    shown: list[str] = []
    merge = _merge(shown)
    a, b = _shard(0, 3), _shard(1, 2)
    for i in range(max(len(a), len(b))):  # interleaved, as two workers write them
        for shard, lines in enumerate((a, b)):
            if i < len(lines):
                merge.line(shard, lines[i])
    numbered = [line for line in shown if line.startswith("[")]
    assert [re.match(r"\[\s*(\d+)/5\]", line).group(1) for line in numbered] == ["1", "2", "3", "4", "5"]
    # The case itself is the worker's line after its index: seconds, verdicts and case unchanged.
    assert numbered[0] == "[1/5]" + _case(1, 3).partition("]")[2]
    assert shown.count(HEADER.format(5)) == 1 and HEADER.format(3) not in shown
    assert shown.count("references (float64 truth, ruler, oracles) on cpu:0") == 1
    assert not [line for line in shown if "results ->" in line or "coverage" in line or "summary" in line]
    assert "verdict: 0 bugs" not in shown and len(shown) == 7


def test_a_worker_error_is_shown_with_its_shard_and_a_line_several_shards_print_once() -> None:
    shown: list[str] = []
    merge = _merge(shown)
    merge.say("k: the probe found the kernel exact")  # the parent's own line
    for shard in (0, 1):
        merge.line(shard, "k: the probe found the kernel exact")
        merge.line(shard, "UserWarning: something jax says in every process")
    merge.line(1, "Traceback (most recent call last):")
    merge.line(1, "harness failure: ValueError: boom (traceback in /tmp/x)")
    assert shown == [
        "k: the probe found the kernel exact",
        "shard 0/2: UserWarning: something jax says in every process",
        "shard 1/2: Traceback (most recent call last):",
        "shard 1/2: harness failure: ValueError: boom (traceback in /tmp/x)",
    ]


def test_a_line_after_a_shards_summary_header_stays_in_its_log_alone() -> None:
    shown: list[str] = []
    merge = _merge(shown)
    merge.line(0, stream.summary_header(Shard(0, 2)))
    merge.line(0, "interrupted")
    merge.line(1, "interrupted")
    assert shown == ["shard 1/2: interrupted"]


def test_the_status_line_counts_failures_and_says_the_time_left_every_so_often() -> None:
    shown: list[str] = []
    clock = Clock()
    merge = _merge(shown, clock, kernel_cases=10)
    merge.line(0, "results -> store/records/run-0")  # the pace is timed from the first worker line
    clock.now += 10
    merge.line(0, _case(1, 5, "FAIL"))
    merge.line(1, _case(1, 5, "FINDING"))  # an oracle's finding: not a kernel failure
    assert not [line for line in shown if line.startswith("--")]
    clock.now += stream.STATUS_EVERY_S
    merge.line(1, _case(2, 5, "FAIL"))
    merge.line(0, _case(2, 5))
    status = [line for line in shown if line.startswith("--")]
    assert status == ["-- 3/10 cases, 2 failing, 0:40 so far, about 1:33 left"]
    assert merge.failing == 2 and merge.done == 4
    assert merge.status(clock.now + 3600) == "-- 4/10 cases, 2 failing, 1:00:40 so far, about 1:31:00 left"


def test_more_cases_than_planned_never_read_past_the_total() -> None:
    shown: list[str] = []
    merge = _merge(shown, kernel_cases=1)
    merge.line(0, _case(1, 1))
    merge.line(1, _case(1, 1))
    assert shown == ["[1/1]" + _case(1, 1).partition("]")[2], "[2/2]" + _case(1, 1).partition("]")[2]]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param({"jobs": 0, "kernel_cases": 5, "kernels": 1}, "self.jobs=0", id="no-workers"),
        pytest.param({"jobs": 2, "kernel_cases": -1, "kernels": 1}, "self.kernel_cases=-1", id="negative-cases"),
    ],
)
def test_a_bad_merge_says_which_count(kw: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        stream.Merge(show=print, **kw)


def test_the_parent_reads_each_whole_line_once_and_the_last_partial_one_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / stream.log_name(Shard(1, 2))
    got: list[tuple[int, str]] = []
    with open(path, "wb") as written, open(path, "rb", buffering=0) as read:
        log = processes._Log(1, read)
        written.write(b"[1/3] one\n[2/3] tw")
        written.flush()
        log.read(lambda i, line: got.append((i, line)))
        assert got == [(1, "[1/3] one")]
        written.write(b"o\r\nno newline at the end")
        written.flush()
        log.read(lambda i, line: got.append((i, line)))
        log.read(lambda i, line: got.append((i, line)), final=True)
    assert got == [(1, "[1/3] one"), (1, "[2/3] two"), (1, "no newline at the end")]
    assert path.name == "shard-1-of-2.log"
