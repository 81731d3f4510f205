"""Terminal formatting of results. Pure: plain data in, strings out."""

from __future__ import annotations

from pathlib import Path

from harness.core.case import Case
from harness.core.errors import InputError
from harness.core.locate import tiling
from harness.core.numbers import multiple
from harness.core.summary import KernelSummary
from harness.running.runner import CaseResult
from harness.running.session import RunOutcome
from harness.running.sink import StoreSink
from harness.store import bug_views
from harness.store import counts as counting
from harness.store.counts import Counts
from harness.store.failures import FailureRecord

# A case line fits a terminal: the block sizes as a tiling label, the whole case with -v and in the records.
LINE_MAX = 150


def tiling_label(blocks: dict[str, int]) -> str:
    """The tiles of each pass in a few characters: 'tiles=q128,k128' when every pass has the same,
    else one group per pass ('tiles=q128,k512/128 dq:q64,k128 ...'; major/minor as k512/128).
    Block sizes that name no tile (block_b) are left to the full case."""

    def pair(minor: int | None, major: int | None) -> str:
        return f"{major}/{minor}" if major is not None and minor is not None and major != minor else f"{minor or major}"

    groups = {}
    for pass_ in ("fwd", "dq", "dkv"):
        t = tiling(blocks, pass_)
        if (t.q, t.q_major, t.k, t.k_major) != (None, None, None, None):
            groups[pass_] = f"q{pair(t.q, t.q_major)},k{pair(t.k, t.k_major)}"
    if not groups:
        return ""
    if len(set(groups.values())) == 1:
        return f"tiles={next(iter(groups.values()))}"
    return "tiles=" + " ".join(g if p == "fwd" else f"{p}:{g}" for p, g in groups.items())


def case_label(case: Case) -> str:
    """The case as its str() has it, with the block sizes shortened to a tiling label."""
    text, _, _ = str(case).partition(" blocks=")
    label = tiling_label(case.block_dict) if case.blocks else ""
    return f"{text} {label}" if label else text


def progress_line(index: int, total: int, result: CaseResult, *, verbose: bool = False) -> str:
    """One finished case: its verdicts, then the case (shortened to LINE_MAX characters unless verbose)."""
    width = len(str(total))
    parts = []
    for s in result.subjects:
        worst = s.worst
        # How much of its tolerance the closest comparison used (1.0 = at the bound).
        shown = worst is not None and s.passed and worst.bound > 0
        ratio = f" {multiple(worst.max_abs / worst.bound)}" if shown else ""
        # An oracle outside its tolerance is a finding about the oracle, not a kernel failure.
        verdict = "ok" if s.passed else ("FINDING" if s.role == "oracle" else "FAIL")
        parts.append(f"{s.implementation} {verdict}{ratio}")
    line = f"[{index:>{width}}/{total}] {result.seconds:5.1f}s  {' | '.join(parts)}  "
    if verbose:
        return line + str(result.case)
    line += case_label(result.case)
    return line if len(line) <= LINE_MAX else line[: LINE_MAX - 3] + "..."


# What the summary table's columns measure, printed under it.
SUMMARY_LEGEND = (
    "drawn: cases drawn and checked; failing: of them, those that failed; bugs: root causes, one per failure file "
    "(its shrunk case is not counted as a failing case); wall s/case: a kernel's whole search (drawing, shrinking, "
    "replays) per drawn case, an oracle's own seconds per case"
)


def summary_table(rows: list[KernelSummary], counts: Counts | None = None) -> str:
    """One line per row: drawn cases, failing ones, (with `counts`) bugs, worst error/bound (the failing worst on a
    failure: summary.worst_used), wall seconds per drawn case, status."""
    width = max([28, *(len(r.kernel) for r in rows)])
    bugs = f" {'bugs':>4}" if counts is not None else ""
    header = f"{'kernel':<{width}} {'drawn':>5} {'failing':>7}{bugs} {'worst err/bound':>15} {'wall s/case':>11}"
    header += "  status"
    lines = [header, "-" * len(header)]
    for r in rows:
        worst = multiple(r.worst) if r.worst is not None else "-"
        per = f"{r.seconds_per_case:.2f}" if r.seconds_per_case is not None else "-"
        n = f" {len(counts.of(r.kernel).bugs) if r.is_kernel else '-':>4}" if counts is not None else ""
        lines.append(f"{r.kernel:<{width}} {r.examples:>5} {r.failed:>7}{n} {worst:>15} {per:>11}  {r.status}")
    return "\n".join(lines)


def verdict_lines(counts: Counts) -> list[str]:
    """The run's counts (harness.store.counts) and each bug, as the JSON, JUnit and the report count them."""
    lines = [f"\nverdict: {counting.headline(counts)} (the shrunk case of each bug counted apart, not as a failure)"]
    return lines + [f"  bug {i}: {line}" for i, line in enumerate(bug_views.verdict_lines(counts), 1)]


def outcome_text(outcome: RunOutcome, counts: Counts | None = None) -> str:
    """What a finished run prints: its summary and counts, then each failure and finding, and whether it was
    stopped. `counts`: the run's (harness.store.counts); None: counted here from its records."""
    tally = _counts(outcome) if counts is None else counts
    table = [summary_table(list(outcome.rows), tally if isinstance(tally, Counts) else None), SUMMARY_LEGEND]
    if outcome.merged is not None:
        m = outcome.merged
        lines = [f"\n== merged summary of {len(m.run_ids)} of {m.jobs} shards: {', '.join(m.run_ids)}"]
        lines += [*table, *m.coverage, *m.lost]
        if m.same_bug:
            lines += ["one bug, found by several shards: its failure file is the first named here"]
            lines += [f"  {line}" for line in m.same_bug]
        if m.nested:
            lines += ["triggers that nest, failing another way (one may be the other with another symptom; not merged)"]
            lines += [f"  {line}" for line in m.nested]
        # Each bug as its failure file holds it, the one value every view renders (the workers' logs keep theirs).
        lines += [part for b in (tally.bugs if isinstance(tally, Counts) else ()) for part in ("", bug_views.text(b))]
    else:
        lines = ["", *table, *_findings(outcome)]
    lines += verdict_lines(tally) if isinstance(tally, Counts) else [f"\nverdict: not counted: {tally}"]
    lines += [f"\nXPASS (strict): {line}" for line in outcome.unexpected_passes]
    if outcome.interrupted:
        lines.append(f"\nrun interrupted: every case finished so far is in {outcome.records}")
    return "\n".join(lines)


def _counts(outcome: RunOutcome) -> Counts | str:
    """The run's counts from its records (harness.store.counts); where they cannot be read, why."""
    runs = set(outcome.merged.run_ids) if outcome.merged is not None else None
    try:
        return counting.count(counting.run_records(outcome.records, runs))
    except InputError as e:
        return str(e)


def _findings(outcome: RunOutcome) -> list[str]:
    """Each failure shrunk, with its tables and replay line; then interpreter divergences and oracle findings."""
    lines = []
    for failure in outcome.failures:
        if failure.same_bug_as is not None:  # one finding met twice: its first failure's file is the report
            name = failure.known.name if failure.known is not None else "the same bug"
            lines.append(f"\n{name} again, kept as {failure.path}: one bug, its file {failure.same_bug_as}")
            continue
        lines += ["", bug_views.text(failure.bug)]
    for r in outcome.rows:
        if r.divergence and r.failed:
            lines.append(
                f"\nINTERPRETER DIVERGENCE: {r.kernel}: the two interpreters disagreed on {r.failed} of "
                f"{r.examples} cases both ran; not counted as kernel failures (the faithful interpreter's "
                f"verdict is the kernel's). Replayable files under {outcome.out / 'divergences'}"
            )
    for r in outcome.rows:
        if r.oracle and r.failed:
            lines.append(
                f"\nORACLE FINDING: {r.kernel} was outside its own tolerance on {r.failed} of {r.examples} "
                "cases; not counted against any kernel (the kernels are judged on the float64 truth). "
                f"Its records are in {outcome.records}"
            )
    return lines


def replay_header(path: object, record: FailureRecord, case: object) -> str:
    """What a replay is about to run, from a failure file's record."""
    oracles = ", ".join(record.oracles) or "no oracle"
    passes = "forward and backward" if record.grads else "forward only"
    interpret = record.interpret or {}
    checks = ", ".join(f"{k}={v}" for k, v in sorted(interpret.items())) or "defaults"
    lines = [
        f"replaying {path}",
        f"  kernel {record.kernel} vs {oracles}, {passes}; interpreter {checks}",
        f"  case {case}",
    ]
    if record.failure:
        lines.append(f"  recorded failure: {record.failure}")
    return "\n".join(lines)


class TerminalSink(StoreSink):
    """A run's sink on the command line: the store, with each finished case printed as one line (the whole case
    with `verbose`). The run calls it down from its search (harness.running.sink), never back into the command."""

    def __init__(self, out: Path, *, verbose: bool = False) -> None:
        super().__init__(out)
        self.verbose = verbose

    def progress(self, index: int, total: int, result: CaseResult) -> None:
        print(progress_line(index, total, result, verbose=self.verbose), flush=True)
