"""The report's data step: records in, plain dataclasses out, nothing rendered. Pure.

Everything the template shows is computed here from the records (and, for the baseline
comparison, from harness.gate), so the HTML step only lays it out.
"""
# Long module: one builder per section of the page; a new section goes in a module of its own (fork, conventions,
# outline, versions) and is only hooked in here.

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from collections import defaultdict
from typing import Any

from harness.core.case import DTYPES
from harness.core.compare import Comparison, oracle_multiple
from harness.core.locate import Located
from harness.core.numbers import multiple
from harness.core.summary import KernelSummary
from harness.gate import GateResult
from harness.gate.thresholds import Thresholds
from harness.report.conventions import ConventionRow
from harness.report.fork import ForkSection, section
from harness.report.outline import TraceLink, outline_by_version, traces
from harness.report.versions import (
    CorrectnessRow,
    Env,
    SeriesRow,
    compile_time_by_version,
    correctness_by_version,
    environments,
    kernels_by_version,
    memory_by_version,
    speed_by_version,
)
from harness.store import bug_views
from harness.store import counts as counting
from harness.store.bug import Bug
from harness.store.cells import CellRow, cell_rows
from harness.store.derive import (
    Uses,
    case_text,
    compile_replay,
    failure_file,
    failure_line,
    interpreters_line,
    mask_label,
    repro_command,
    uses_of,
)
from harness.store.derive import record_uses as _uses
from harness.store.read import Records, compile_key
from harness.store.records import CaseRecord, LeakRecord, RunRecord

# A passing comparison that used more than this share of its tolerance is shown as close.
CLOSE = 0.8
# A bug's rows that are text in columns (its error tables, the strips of where its error sits): a card shows them
# as written, in monospace; every other row is words.
COLUMNS = frozenset(f.metadata["label"] for f in dataclasses.fields(Bug) if f.name in ("tables", "where"))
# Failing examples listed beyond the shrunk ones (Hypothesis tries many on the way down).
MAX_OTHER_FAILURES = 40


# --- the matrix: kernel x subject x dtype x mask ---


@dataclasses.dataclass(kw_only=True)
class Cell:
    n: int = 0
    failed: int = 0
    worst_used: float = 0.0  # max over comparisons of max_abs / bound
    # max over comparisons of the error in units of the plain oracle's, where the oracle's error is above the
    # tolerance's floor (compare.oracle_multiple); None where it is nowhere: no multiple shown
    worst_ratio: float | None = None

    @property
    def css(self) -> str:
        if self.failed:
            return "fail"
        return "close" if self.worst_used > CLOSE else "pass"


@dataclasses.dataclass(kw_only=True)
class MatrixRow:
    kernel: str
    subject: str
    role: str
    mask: str
    cells: list[Cell | None]


@dataclasses.dataclass
class Matrix:
    dtypes: list[str]
    rows: list[MatrixRow]


def _finite_max(values: list[float]) -> float:
    xs = [v for v in values if not math.isnan(v)]
    return max(xs, default=0.0)


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def kernel_of(cases: list[CaseRecord]) -> dict[tuple[str, str], str]:
    """(run_id, case_id) -> the kernel that case was drawn for (oracles run beside it)."""
    return {(r.run_id, r.case_id): r.implementation for r in cases if r.role == "kernel"}


def matrix(cases: list[CaseRecord], uses: Uses | None = None) -> Matrix:
    kernels = kernel_of(cases)
    cells: dict[tuple[str, str, str, str], Cell] = {}
    roles: dict[str, str] = {}
    for rec in cases:
        subject = rec.implementation
        roles[subject] = str(rec.role)
        kernel = kernels.get((rec.run_id, rec.case_id), "-")
        cell = cells.setdefault((kernel, subject, str(rec.dtype), mask_label(rec)), Cell())
        cell.n += 1
        cell.failed += not rec.passed
        cell.worst_used = max(cell.worst_used, _finite_max(_uses(rec, uses)))
        multiples = [oracle_multiple(x, str(rec.dtype), rec.implementation) for x in rec.comparisons]
        shown = [m for m in multiples if m is not None and not math.isnan(m)]
        if shown:
            cell.worst_ratio = max([cell.worst_ratio or 0.0, *shown])
    dtypes = [d for d in DTYPES if any(k[2] == d for k in cells)]
    dtypes += sorted({k[2] for k in cells} - set(dtypes))
    rows = []
    for kernel, subject, mask in sorted(
        {(k[0], k[1], k[3]) for k in cells}, key=lambda t: (t[0], roles.get(t[1]) != "kernel", t[1], t[2])
    ):
        rows.append(
            MatrixRow(
                kernel=kernel,
                subject=subject,
                role=roles.get(subject, ""),
                mask=mask,
                cells=[cells.get((kernel, subject, d, mask)) for d in dtypes],
            )
        )
    return Matrix(dtypes, rows)


# --- error-ratio distribution ---

# Histogram bins of log10(max_abs / bound): 1e-4 .. 1e1, half a decade each; 0 is the bound.
HIST_EDGES = [x / 2 for x in range(-8, 3)]


@dataclasses.dataclass(kw_only=True)
class Histogram:
    implementation: str
    counts: list[int]  # underflow, one per bin, overflow
    labels: list[str]
    n: int
    over_bound: int


def histograms(cases: list[CaseRecord], uses: Uses | None = None) -> list[Histogram]:
    by_impl: dict[str, list[float]] = defaultdict(list)
    for rec in cases:
        by_impl[rec.implementation].extend(u for u in _uses(rec, uses) if not math.isnan(u))
    labels = [f"<1e{HIST_EDGES[0]:g}"] + [f"1e{lo:g}" for lo in HIST_EDGES[:-1]] + [f">1e{HIST_EDGES[-1]:g}"]
    out = []
    for impl in sorted(by_impl):
        counts = [0] * (len(HIST_EDGES) + 1)
        for u in by_impl[impl]:
            x = math.log10(u) if u > 0 else -math.inf
            i = sum(x >= e for e in HIST_EDGES)
            counts[i] += 1
        out.append(
            Histogram(
                implementation=impl,
                counts=counts,
                labels=labels,
                n=len(by_impl[impl]),
                over_bound=sum(u > 1 for u in by_impl[impl]),
            )
        )
    return out


# --- failures ---


@dataclasses.dataclass(kw_only=True)
class ComparisonView:
    quantity: str
    max_abs: str
    max_rel: str
    oracle: str
    ratio: str
    bound: str
    used: str
    passed: bool
    note: str


def _sci(x: Any) -> str:
    v = _num(x)
    return f"{v:.2e}" if math.isfinite(v) else str(v)


@dataclasses.dataclass(kw_only=True)
class FailureView:
    kind: str  # "case" or "compile"
    implementation: str
    env: str
    run_id: str
    title: str  # the case, or the compile check
    case_json: str
    why: str
    error: str | None
    traceback: str | None
    comparisons: list[ComparisonView]
    repro: str | None
    shrunk: bool
    # Where the error sits (records written before errors were located have none: no picture).
    case: dict[str, Any] | None = None
    located: Located | None = None
    where: list[str] = dataclasses.field(default_factory=list)
    interpreters: str = ""  # which Pallas interpreter computed it, and what the other saw (derive.interpreters_line)
    # A bug's card (a failure with its failure file, or its shrunk case): the value every view shows
    # (harness.store.bug), and its rows as harness.store.bug_views words them: the card shows these, nothing else.
    bug: Bug | None = None
    heading: str = ""
    rows: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def card(self) -> list[tuple[str, bool, list[str]]]:
        """The card's rows as it lays them out: (label, whether its text is in columns (COLUMNS), its lines)."""
        return [(label, label in COLUMNS, text.splitlines()) for label, text in self.rows]


def _comparison_views(comparisons: list[Comparison], rec: CaseRecord) -> list[ComparisonView]:
    """`rec`'s comparisons as the failure card shows them (`rec` names their dtype and implementation)."""
    out = []
    for c in comparisons:
        u = c.used
        shown = oracle_multiple(c, str(rec.dtype), rec.implementation)
        out.append(
            ComparisonView(
                quantity=str(c.quantity),
                max_abs=_sci(c.max_abs),
                max_rel=_sci(c.max_rel),
                oracle=_sci(c.oracle_abs),
                ratio=multiple(shown) if shown is not None else "-",
                bound=_sci(c.bound),
                used=multiple(u) if not math.isnan(u) else "-",
                passed=bool(c.passed),
                note=str(c.note or ""),
            )
        )
    return out


def failures(records: Records, run_env: dict[str, Env]) -> tuple[list[FailureView], list[FailureView]]:
    """(failures with a shrunk case or a repro file, and up to MAX_OTHER_FAILURES other failing examples)."""
    main, other = [], []
    listed: set[tuple[str, str]] = set()  # (implementation, failure file) of the failures listed in main
    for rec in records.cases:
        if rec.passed:
            continue
        path = failure_file(rec, records.roots)
        # One bug, one entry: a failure whose file another listed failure names already (two shards of a
        # `run --jobs` found it, harness.running.jobs.same_bug.same_bugs) is one of its other examples.
        if (rec.shrunk or path) and (path is None or (rec.implementation, str(path)) not in listed):
            main.append(_bug_view(rec, run_env[rec.run_id].label, counting.bug_of(rec, records)))
            listed.add((rec.implementation, str(path)))
            continue
        view = FailureView(
            kind="case",
            implementation=rec.implementation,
            env=run_env[rec.run_id].label,
            run_id=rec.run_id,
            title=case_text(rec.case),
            case_json=json.dumps(rec.case, indent=1, sort_keys=True),
            why=failure_line(rec),
            error=rec.error,
            traceback=rec.traceback,
            comparisons=_comparison_views(rec.comparisons, rec),
            repro=repro_command(path),
            shrunk=rec.shrunk,
            interpreters=interpreters_line(rec),
        )
        other.append(view)
    for rec in records.compiles:
        if rec.ok:
            continue
        impl, topology, shape, pass_ = compile_key(rec)
        main.append(
            FailureView(
                kind="compile",
                implementation=impl,
                env=run_env[rec.run_id].label,
                run_id=rec.run_id,
                title=f"compile {pass_} of shape {shape} for {topology}",
                case_json=json.dumps(rec.shape_case, indent=1, sort_keys=True),
                why=failure_line(rec),
                error=rec.error,
                traceback=None,  # a compile record keeps no traceback: its failure file does
                comparisons=[],
                repro=compile_replay(rec),
                shrunk=False,
            )
        )
    main.sort(key=lambda f: (f.kind, f.implementation, f.env, f.title))
    return main, other[:MAX_OTHER_FAILURES]


def _bug_view(rec: CaseRecord, env: str, bug: Bug) -> FailureView:
    """A bug's card: its rows (bug_views.rows) and, where its errors are located, the picture of where they sit."""
    located = next((t.located for t in bug.tables if t.located is not None), None)
    return FailureView(
        kind="case",
        implementation=rec.implementation,
        env=env,
        run_id=rec.run_id,
        title=bug.shrunk_case,
        case_json=json.dumps(bug.case, indent=1, sort_keys=True),
        why=bug.failure,
        error=None,
        traceback=rec.traceback,
        comparisons=[],
        repro=bug.replay,
        shrunk=rec.shrunk,
        case=bug.case if located is not None else None,
        located=located,
        interpreters=interpreters_line(rec),
        bug=bug,
        heading=bug_views.title(bug),
        rows=bug_views.rows(bug),
    )


def divergences(records: Records, run_env: dict[str, Env]) -> list[FailureView]:
    """Interpreter divergences (CaseRecord.divergence): the fast interpreter's side, which failed."""
    out = []
    for rec in records.cases:
        if not rec.divergence:
            continue
        out.append(
            FailureView(
                kind="divergence",
                implementation=rec.implementation,
                env=run_env[rec.run_id].label,
                run_id=rec.run_id,
                title=case_text(rec.case),
                case_json=json.dumps(rec.case, indent=1, sort_keys=True),
                why=interpreters_line(rec),
                error=rec.shadow.error if rec.shadow is not None else None,
                traceback=None,
                comparisons=_comparison_views(rec.shadow.comparisons if rec.shadow is not None else [], rec),
                repro=None,  # the run wrote it under DIR/divergences/ and printed its replay
                shrunk=False,
                interpreters=interpreters_line(rec),
            )
        )
    return sorted(out, key=lambda f: (f.implementation, f.env, f.title))


# --- runs ---


@dataclasses.dataclass(kw_only=True)
class RunView:
    run_id: str
    started: str
    status: str
    profile: str
    command: str
    env: str
    versions: list[tuple[str, str]]
    machine: list[tuple[str, str]]
    counts: str
    side: str  # "baseline", "candidate" or ""
    # Per kernel the run searched: its pairwise coverage line and the pairs no case had (harness.core.features).
    pairwise: list[tuple[str, str, tuple[str, ...]]] = dataclasses.field(default_factory=list)


def _pairwise(run: RunRecord | None) -> list[tuple[str, str, tuple[str, ...]]]:
    # `run` writes one summary row per kernel with its Coverage; rows of oracles and runs
    # written before it existed have none.
    out = []
    for row in KernelSummary.rows_of(run.field("summary") if run is not None else None):
        try:
            covered = row.coverage()
        except ValueError as e:
            out.append((row.kernel, f"unreadable pairwise coverage: {e}", ()))
            continue
        if covered is not None:
            out.append((row.kernel, covered.line(), covered.missing_pairs))
    return out


def _started(run_id: str) -> str:
    m = re.match(r"(\d{8}T\d{6}Z)", run_id)
    if not m:
        return "?"
    return dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%d %H:%M UTC")


def runs(records: Records, run_env: dict[str, Env], sides: dict[str, str]) -> list[RunView]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for kind, group in (("cases", records.cases), ("bench", records.benches), ("compile", records.compiles)):
        for r in group:
            counts[r.run_id][kind] += 1
    out = []
    for run_id in sorted(records.run_ids, key=lambda r: (_started(r), r)):
        run = records.runs.get(run_id)
        cmd = run.command if run is not None else None
        out.append(
            RunView(
                run_id=run_id,
                started=_started(run_id),
                status=str(run.status) if run is not None else "no run.json",
                profile=str(run.profile or "") if run is not None else "",
                command=" ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd or ""),
                env=run_env[run_id].label,
                versions=sorted((str(k), str(v)) for k, v in (run.versions if run is not None else {}).items()),
                machine=sorted((str(k), str(v)) for k, v in (run.machine if run is not None else {}).items()),
                counts=", ".join(f"{n} {k}" for k, n in counts[run_id].items()) or "no records",
                side=sides.get(run_id, ""),
                pairwise=_pairwise(run),
            )
        )
    return out


# --- the whole report ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeakRow:
    """One leak record (harness.running.leak): growth per call of each series, and the samples to plot."""

    implementation: str
    variant: str
    calls: int
    passed: bool
    error: str | None
    growth: list[tuple[str, str, bool]]  # (series, "+slope unit/call (limit L)", past its limit)
    samples: list[float]  # the series to plot: the first one past its limit, else live_bytes
    plotted: str


def leak_rows(leaks: list[LeakRecord]) -> list[LeakRow]:
    rows = []
    for rec in sorted(leaks, key=lambda r: (str(r.implementation), str(r.variant))):
        text = [
            (series, f"{slope:+.3g}/call (limit {limit:.3g})", slope > limit)
            for series, slope, limit in rec.series_growth
        ]
        plotted = next((name for name, _, bad in text if bad), "live_bytes")
        samples = (rec.samples or {}).get(plotted) or []
        rows.append(
            LeakRow(
                implementation=str(rec.implementation),
                variant=str(rec.variant),
                calls=int(rec.calls or 0),
                passed=bool(rec.passed),
                error=rec.error,
                growth=text,
                samples=[float(x) for x in samples if isinstance(x, int | float)],
                plotted=plotted,
            )
        )
    return rows


@dataclasses.dataclass(kw_only=True)
class Verdict:
    status: str  # "pass", "fail" (failures, no baseline) or "regression" (the gate failed)
    headline: str
    details: list[str]
    baseline: str | None
    # An upgrade's verdict: (group, lines) for regressions, improvements, new, not compared, within noise.
    groups: list[tuple[str, list[str]]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(kw_only=True)
class Report:
    title: str
    generated: str
    sources: list[str]
    verdict: Verdict
    gate: GateResult | None
    counts: dict[str, int]
    matrix: Matrix
    matrix_scope: str
    histograms: list[Histogram]
    envs: list[Env]
    correctness: list[CorrectnessRow]
    speed: list[SeriesRow]
    memory: list[SeriesRow]
    failures: list[FailureView]
    other_failures: list[FailureView]
    other_failures_total: int
    conventions: list[ConventionRow]
    conventions_source: str
    runs: list[RunView]
    problems: list[str]
    thresholds: Thresholds
    leaks: list[LeakRow] = dataclasses.field(default_factory=list)
    # Trace, lowering and compile seconds, and the Mosaic kernels lowered to, per version.
    compile_times: list[SeriesRow] = dataclasses.field(default_factory=list)
    kernels: list[SeriesRow] = dataclasses.field(default_factory=list)
    # The program around the kernels per version (harness.store.outline), and the traces `profile` wrote.
    outlines: list[SeriesRow] = dataclasses.field(default_factory=list)
    traces: list[TraceLink] = dataclasses.field(default_factory=list)
    # Per matrix cell and implementation: the verdict and the API coverage (harness.store.cells.cell_rows).
    cells: list[CellRow] = dataclasses.field(default_factory=list)
    divergences: list[FailureView] = dataclasses.field(default_factory=list)  # between the two interpreters
    forks: ForkSection = dataclasses.field(default_factory=ForkSection)  # the stores' fork records (report.fork)
    # What the failures section and the per-version table count (harness.store.counts), as the nav says it; the
    # bugs of each (implementation, version) row of the per-version table.
    tally: counting.Counts = dataclasses.field(default_factory=lambda: counting.Counts(kernels=()))
    nav_failures: str = ""
    version_bugs: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)


def _findings(current: Records, tally: counting.Counts) -> tuple[list[str], list[str]]:
    """(what failed, in short, for the headline; one line each: every bug, then every other finding)."""
    # An oracle outside its tolerance is a finding about the oracle: shown, never a kernel failure.
    oracle_findings = sum(not r.passed for r in current.cases if r.role == "oracle")
    compile_fail = sum(not r.ok for r in current.compiles)
    leaking = sorted({str(r.implementation) for r in current.leaks if not r.passed})
    diverged = sum(r.divergence for r in current.cases)
    short, details = [], []
    if tally.bugs or tally.failing:
        short.append(counting.headline(tally))
        details += bug_views.verdict_lines(tally)
    if compile_fail:
        short.append(counting.plural(compile_fail, "failed compile check"))
    if leaking:
        short.append(f"memory grows with calls (leak): {', '.join(leaking)}")
    details += short[1 if tally.bugs or tally.failing else 0 :]
    if diverged:
        details.append(
            f"{counting.plural(diverged, 'interpreter divergence')} (fast against faithful interpreter; "
            "not counted against kernels)"
        )
    if oracle_findings:
        details.append(f"{counting.plural(oracle_findings, 'oracle finding')} (not counted against kernels)")
    return short, details


def verdict(current: Records, gate: GateResult | None) -> Verdict:
    """The banner: the gate's verdict, else the bugs (each named: kernel, trigger, failing cases, replay) and
    other failures of `current`, counted as harness.store.counts counts them for every view."""
    tally = counting.count(current)
    short, details = _findings(current, tally)
    # Unreadable records, or a run that did not finish (interrupted, killed, still running,
    # failed): the records are not all the run was asked to do, so the verdict is never PASS.
    # With a baseline, a kernel that cannot run is the gate's to judge (not compared, or lost).
    incomplete = current.incomplete(cannot_run=gate is None)
    details += incomplete
    if gate is not None:
        if not gate.rows:
            return Verdict(status="fail", headline=gate.summary(), details=details, baseline=gate.baseline)
        if gate.failed:
            details = [f"{r.category}: {r.subject}: {r.change}" for r in gate.failures] + details
            return Verdict(status="regression", headline=gate.summary(), details=details, baseline=gate.baseline)
        if incomplete:
            return Verdict(
                status="fail", headline=f"INCOMPLETE DATA: {incomplete[0]}", details=details, baseline=gate.baseline
            )
        return Verdict(status="pass", headline=gate.summary(), details=details, baseline=gate.baseline)
    if not (current.cases or current.benches or current.compiles or current.leaks):
        return Verdict(status="fail", headline="NO RECORDS: nothing was run", details=details, baseline=None)
    if short:
        return Verdict(status="fail", headline="FAILURES: " + "; ".join(short), details=details, baseline=None)
    if incomplete:
        n = len(incomplete)
        return Verdict(
            status="fail",
            headline=f"INCOMPLETE DATA ({counting.plural(n, 'problem')}): {incomplete[0]}",
            details=details,
            baseline=None,
        )
    headline = f"PASS: no bug; {counting.headline(tally).split('; ', 1)[1]}"
    return Verdict(status="pass", headline=headline, details=details, baseline=None)


def nav_failures(tally: counting.Counts, views: list[FailureView]) -> str:
    """What the nav's Failures link counts: bugs, failing drawn cases, and failed compile checks where any."""
    compiles = sum(f.kind == "compile" for f in views)
    said = f"{counting.plural(len(tally.bugs), 'bug')}, {counting.plural(tally.failing, 'failing case')}"
    return said + (f", {counting.plural(compiles, 'failed compile check')}" if compiles else "")


def version_bugs(records: Records, envs: list[Env]) -> dict[tuple[str, str], int]:
    """(implementation, version label) -> its bugs there (harness.store.counts), for the per-version table."""
    out = {}
    for env in envs:
        for k in counting.count(records.subset(set(env.runs))).kernels:
            out[(k.kernel, env.label)] = len(k.bugs)
    return out


def build(
    records: Records,
    *,
    current: Records | None = None,
    gate: GateResult | None = None,
    sides: dict[str, str] | None = None,
    conventions: tuple[list[ConventionRow], str] = ([], ""),
    thresholds: Thresholds,
    title: str = "Attention kernel report",
    now: dt.datetime | None = None,
) -> Report:
    """records: everything shown; current: what the verdict and matrix cover (the candidate, else all)."""
    current = records if current is None else current
    envs, run_env = environments(records)
    main, other = failures(records, run_env)
    uses = uses_of(records.cases)
    tally = counting.count(records)
    return Report(
        title=title,
        generated=(now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        sources=[str(r) for r in records.roots],
        verdict=verdict(current, gate),
        gate=gate,
        # Singular: the template writes each count with its noun's plural where it is not 1.
        counts={
            "run": len(records.run_ids),
            "case record": len(records.cases),
            "bench record": len(records.benches),
            "compile record": len(records.compiles),
        },
        matrix=matrix(current.cases, uses),
        matrix_scope="the candidate's records" if current is not records else "every record",
        histograms=histograms(current.cases, uses),
        envs=envs,
        # Drawn cases only: a bug's shrunk case is counted as the bug (version_bugs), not as another failing case.
        correctness=correctness_by_version([r for r in records.cases if not r.shrunk], envs, run_env, uses),
        speed=speed_by_version(records.benches, envs, run_env, thresholds),
        memory=memory_by_version(records.compiles, envs, run_env, thresholds),
        compile_times=compile_time_by_version(records.compiles, envs, run_env, thresholds),
        kernels=kernels_by_version(records.compiles, envs, run_env),
        outlines=outline_by_version(records.compiles, envs, run_env),
        traces=traces(records),
        failures=main,
        other_failures=other,
        other_failures_total=sum(not r.passed for r in records.cases) - sum(f.kind == "case" for f in main),
        conventions=conventions[0],
        conventions_source=conventions[1],
        runs=runs(records, run_env, sides or {}),
        problems=records.problems,
        thresholds=thresholds,
        leaks=leak_rows(records.leaks),
        cells=cell_rows(records.runs, records.cases),
        divergences=divergences(records, run_env),
        forks=section(records.roots),
        tally=tally,
        nav_failures=nav_failures(tally, main),
        version_bugs=version_bugs(records, envs),
    )
