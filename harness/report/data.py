"""The report's data step: records in, plain dataclasses out, nothing rendered. Pure.

Everything the template shows is computed here from the records (and, for the baseline
comparison, from harness.gate), so the HTML step only lays it out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from collections import defaultdict
from typing import Any

from harness import stats
from harness.case import DTYPES
from harness.gate import GateResult, SpeedComparison, compare_samples, fmt_seconds
from harness.report.conventions import ConventionRow
from harness.report.describe import case_text, failure_file, failure_line, repro_command, used
from harness.report.records import Records, bench_key, compile_key, generation, samples
from harness.thresholds import Thresholds, fmt_bytes

# Libraries whose versions name an environment, most significant first.
VERSION_ORDER = ("jax", "jaxlib", "libtpu", "torch", "python", "numpy", "hypothesis", "harness")
# A passing comparison that used more than this share of its tolerance is shown as close.
CLOSE = 0.8
# Failing examples listed beyond the shrunk ones (Hypothesis tries many on the way down).
MAX_OTHER_FAILURES = 40


@dataclasses.dataclass
class Env:
    """One set of library versions; every run with exactly these versions belongs to it."""

    key: tuple[tuple[str, str], ...]
    versions: dict[str, str]
    label: str = ""
    runs: list[str] = dataclasses.field(default_factory=list)


def _version_tuple(v: str | None) -> tuple[Any, ...]:
    if not v:
        return ()
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+-]", v))


def _env_sort_key(versions: dict[str, str]) -> tuple[Any, ...]:
    libs = list(VERSION_ORDER) + sorted(set(versions) - set(VERSION_ORDER))
    # Mixed int/str version parts: compare as (is_str, value) so sorting never raises.
    return tuple(tuple((isinstance(p, str), p) for p in _version_tuple(versions.get(lib))) for lib in libs)


def environments(records: Records) -> tuple[list[Env], dict[str, Env]]:
    """Environments in version order, and each run's environment."""
    envs: dict[tuple[tuple[str, str], ...], Env] = {}
    run_env: dict[str, Env] = {}
    for run_id in sorted(records.run_ids):
        run = records.runs.get(run_id, {})
        versions = {k: str(v) for k, v in (run.get("versions") or {}).items() if v is not None}
        key = tuple(sorted(versions.items()))
        env = envs.setdefault(key, Env(key, versions))
        env.runs.append(run_id)
        run_env[run_id] = env
    ordered = sorted(envs.values(), key=lambda e: _env_sort_key(e.versions))
    libs = [lib for lib in VERSION_ORDER if lib in {k for e in ordered for k in e.versions}]
    libs += sorted({k for e in ordered for k in e.versions} - set(libs))
    differing = [lib for lib in libs if len({e.versions.get(lib) for e in ordered}) > 1]
    shown = differing or [lib for lib in ("jax", "libtpu", "torch") if lib in libs]
    for e in ordered:
        e.label = " · ".join(f"{lib} {e.versions.get(lib, '-')}" for lib in shown) or "unknown versions"
    return ordered, run_env


# --- the matrix: kernel x subject x dtype x mask ---


@dataclasses.dataclass
class Cell:
    n: int = 0
    failed: int = 0
    worst_used: float = 0.0  # max over comparisons of max_abs / bound
    worst_ratio: float = 0.0  # max over comparisons of the error in units of the plain oracle's

    @property
    def css(self) -> str:
        if self.failed:
            return "fail"
        return "close" if self.worst_used > CLOSE else "pass"


@dataclasses.dataclass
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


Uses = dict[int, list[float]]  # id(case record) -> used() of each of its comparisons


def uses_of(cases: list[dict[str, Any]]) -> Uses:
    """used() of every comparison, once per record: the matrix, histograms and version table all need it."""
    return {id(r): [used(c) for c in r.get("comparisons") or []] for r in cases}


def _uses(rec: dict[str, Any], uses: Uses | None) -> list[float]:
    got = uses.get(id(rec)) if uses is not None else None
    return got if got is not None else [used(c) for c in rec.get("comparisons") or []]


def mask_label(case_json: dict[str, Any]) -> str:
    """Case.mask_label from a case's JSON, without building the Case."""
    mask = case_json.get("mask") or {}
    parts = [f"causal_{mask['causal']}"] if mask.get("causal") else []
    parts += ["segments"] if mask.get("segments") else []
    parts += ["bias"] if case_json.get("bias") else []
    return "+".join(sorted(parts)) or "none"


def kernel_of(cases: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(run_id, case_id) -> the kernel that case was drawn for (oracles run beside it)."""
    return {(r["run_id"], r.get("case_id")): str(r.get("implementation")) for r in cases if r.get("role") == "kernel"}


def matrix(cases: list[dict[str, Any]], uses: Uses | None = None) -> Matrix:
    kernels = kernel_of(cases)
    cells: dict[tuple[str, str, str, str], Cell] = {}
    roles: dict[str, str] = {}
    for rec in cases:
        c = rec.get("case") or {}
        subject = str(rec.get("implementation"))
        roles[subject] = str(rec.get("role"))
        kernel = kernels.get((rec["run_id"], rec.get("case_id")), "-")
        comps = rec.get("comparisons") or []
        cell = cells.setdefault((kernel, subject, str(c.get("dtype")), mask_label(c)), Cell())
        cell.n += 1
        cell.failed += not rec.get("passed")
        cell.worst_used = max(cell.worst_used, _finite_max(_uses(rec, uses)))
        cell.worst_ratio = max(cell.worst_ratio, _finite_max([_num(x.get("ratio")) for x in comps]))
    dtypes = [d for d in DTYPES if any(k[2] == d for k in cells)]
    dtypes += sorted({k[2] for k in cells} - set(dtypes))
    rows = []
    for kernel, subject, mask in sorted(
        {(k[0], k[1], k[3]) for k in cells}, key=lambda t: (t[0], roles.get(t[1]) != "kernel", t[1], t[2])
    ):
        rows.append(
            MatrixRow(
                kernel, subject, roles.get(subject, ""), mask, [cells.get((kernel, subject, d, mask)) for d in dtypes]
            )
        )
    return Matrix(dtypes, rows)


# --- error-ratio distribution ---

# Histogram bins of log10(max_abs / bound): 1e-4 .. 1e1, half a decade each; 0 is the bound.
HIST_EDGES = [x / 2 for x in range(-8, 3)]


@dataclasses.dataclass
class Histogram:
    implementation: str
    counts: list[int]  # underflow, one per bin, overflow
    labels: list[str]
    n: int
    over_bound: int


def histograms(cases: list[dict[str, Any]], uses: Uses | None = None) -> list[Histogram]:
    by_impl: dict[str, list[float]] = defaultdict(list)
    for rec in cases:
        by_impl[str(rec.get("implementation"))].extend(u for u in _uses(rec, uses) if not math.isnan(u))
    labels = [f"<1e{HIST_EDGES[0]:g}"] + [f"1e{lo:g}" for lo in HIST_EDGES[:-1]] + [f">1e{HIST_EDGES[-1]:g}"]
    out = []
    for impl in sorted(by_impl):
        counts = [0] * (len(HIST_EDGES) + 1)
        for u in by_impl[impl]:
            x = math.log10(u) if u > 0 else -math.inf
            i = sum(x >= e for e in HIST_EDGES)
            counts[i] += 1
        out.append(Histogram(impl, counts, labels, len(by_impl[impl]), sum(u > 1 for u in by_impl[impl])))
    return out


# --- per library version ---


@dataclasses.dataclass
class Movement:
    """How a figure moved from the previous environment: text, and a css class (worse/better/moved/same/na)."""

    text: str
    css: str
    beyond_noise: bool = False


@dataclasses.dataclass
class CorrectnessRow:
    implementation: str
    env: str
    cases: int
    failed: int
    worst_used: float
    median_used: float
    movement: Movement


@dataclasses.dataclass
class SeriesCell:
    value: float | None  # the figure (median seconds, or bytes)
    text: str
    detail: str  # hover text: spread, samples
    movement: Movement | None


@dataclasses.dataclass
class SeriesRow:
    label: str  # implementation, shape, pass
    group: str  # backend (speed) or TPU generation (memory)
    plot: str  # the plot this series is drawn in
    name: str  # its name in that plot's legend
    cells: list[SeriesCell]  # one per environment
    lows: list[float | None] = dataclasses.field(default_factory=list)
    highs: list[float | None] = dataclasses.field(default_factory=list)


def correctness_by_version(
    cases: list[dict[str, Any]], envs: list[Env], run_env: dict[str, Env], uses: Uses | None = None
) -> list[CorrectnessRow]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in cases:
        groups[(str(rec.get("implementation")), run_env[rec["run_id"]].label)].append(rec)
    rows = []
    for impl in sorted({k[0] for k in groups}):
        prev: tuple[int, float] | None = None
        for env in envs:
            recs = groups.get((impl, env.label))
            if not recs:
                continue
            ratios = [u for r in recs for u in _uses(r, uses) if not math.isnan(u)]
            failed = sum(not r.get("passed") for r in recs)
            worst = max(ratios, default=math.nan)
            if prev is None:
                mv = Movement("first version", "na")
            elif failed != prev[0]:
                mv = Movement(f"{failed - prev[0]:+d} failing", "worse" if failed > prev[0] else "better", True)
            elif math.isclose(worst, prev[1], rel_tol=0.01) or (math.isnan(worst) and math.isnan(prev[1])):
                mv = Movement("no change", "same")
            else:
                mv = Movement(f"worst {prev[1]:.2f} -> {worst:.2f}", "same")
            rows.append(
                CorrectnessRow(
                    impl, env.label, len(recs), failed, worst, stats.median(ratios) if ratios else math.nan, mv
                )
            )
            prev = (failed, worst)
    return rows


def _speed_movement(cmp: SpeedComparison, th: Thresholds) -> Movement:
    """Slower/faster only past the gate's test and factor; a significant move within the factor is said so."""
    pct = f"{cmp.ratio - 1:+.1%} " if not math.isnan(cmp.ratio) else ""
    p = f"p={cmp.p:.2g}" if cmp.p is not None else ""
    if cmp.status == "insufficient":
        return Movement(f"{pct}(too few samples)", "na")
    if cmp.status in ("worse", "better"):
        return Movement(f"{pct}{'slower' if cmp.status == 'worse' else 'faster'} ({p})", cmp.status, True)
    if cmp.p is not None and cmp.p < th.alpha:
        return Movement(f"{pct}beyond noise ({p}), within {th.factor:g}x", "moved", True)
    return Movement(f"{pct}noise ({p})", "same")


def speed_by_version(
    benches: list[dict[str, Any]], envs: list[Env], run_env: dict[str, Env], th: Thresholds
) -> list[SeriesRow]:
    groups: dict[tuple[str, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in benches:
        groups[bench_key(rec)][run_env[rec["run_id"]].label].extend(samples(rec))
    rows = []
    for key in sorted(groups):
        impl, shape, pass_, where = key
        cells, lows, highs = [], [], []
        prev: list[float] | None = None
        for env in envs:
            xs = groups[key].get(env.label)
            if not xs:
                cells.append(SeriesCell(None, "-", "not timed", None))
                lows.append(None)
                highs.append(None)
                continue
            s = stats.summarize(xs)
            mv = None
            if prev is not None:
                mv = _speed_movement(compare_samples(prev, xs, th), th)
            detail = f"n={s.n}, quartiles {fmt_seconds(s.q1)} .. {fmt_seconds(s.q3)}, min {fmt_seconds(s.min)}"
            cells.append(SeriesCell(s.median, fmt_seconds(s.median), detail, mv))
            lows.append(s.q1)
            highs.append(s.q3)
            prev = xs
        rows.append(
            SeriesRow(f"{impl} {pass_} {shape}", where, f"{pass_} on {where}", f"{impl} {shape}", cells, lows, highs)
        )
    return rows


def memory_by_version(
    compiles: list[dict[str, Any]], envs: list[Env], run_env: dict[str, Env], th: Thresholds
) -> list[SeriesRow]:
    """Compiled temp memory per TPU generation, shape and pass, moved against the gate's temp limit."""
    groups: dict[tuple[str, ...], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for rec in compiles:
        groups[compile_key(rec)][run_env[rec["run_id"]].label].append(rec)
    limit = next((lim for lim in th.limits if lim.field == "temp_bytes"), None)
    rows = []
    for key in sorted(groups, key=lambda k: (generation(k[1]), k)):
        impl, topology, shape, pass_ = key
        cells = []
        prev: float | None = None
        for env in envs:
            recs = groups[key].get(env.label)
            if not recs:
                cells.append(SeriesCell(None, "-", "not compiled", None))
                continue
            if not all(r.get("ok") for r in recs):
                bad = next(r for r in recs if not r.get("ok"))
                cells.append(SeriesCell(None, "FAILS", failure_line(bad), Movement("compile fails", "worse", True)))
                prev = None
                continue
            temps = [float(t) for r in recs if (t := (r.get("memory") or {}).get("temp")) is not None]
            if not temps:
                cells.append(SeriesCell(None, "?", "no memory figures recorded", None))
                continue
            temp = stats.median(temps)
            mem = recs[0].get("memory") or {}
            total = sum(float(mem.get(k) or 0) for k in ("argument", "output", "temp", "generated_code"))
            detail = ", ".join(f"{k} {fmt_bytes(float(v))}" for k, v in mem.items() if v is not None)
            mv = None
            if prev is not None:
                change = temp / prev - 1 if prev else (0.0 if temp == 0 else math.inf)
                if limit is not None:
                    out = limit.check(prev, temp)
                    css = {"worse": "worse", "better": "better", "unchanged": "same"}[out.status]
                    mv = Movement(
                        f"{change:+.1%}" if math.isfinite(change) else "from 0", css, out.status != "unchanged"
                    )
                else:
                    mv = Movement(f"{change:+.1%}", "same" if change == 0 else "na", change != 0)
            cells.append(SeriesCell(temp, fmt_bytes(temp), f"{detail}; total {fmt_bytes(total)}", mv))
            prev = temp
        gen = generation(topology)
        rows.append(SeriesRow(f"{impl} {pass_} {shape}", f"{gen} ({topology})", gen, f"{impl} {pass_} {shape}", cells))
    return rows


# --- failures ---


@dataclasses.dataclass
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


@dataclasses.dataclass
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


def _comparison_views(rec: dict[str, Any]) -> list[ComparisonView]:
    out = []
    for c in rec.get("comparisons") or []:
        u = used(c)
        out.append(
            ComparisonView(
                str(c.get("quantity")),
                _sci(c.get("max_abs")),
                _sci(c.get("max_rel")),
                _sci(c.get("oracle_abs")),
                f"{_num(c.get('ratio')):.2f}",
                _sci(c.get("bound")),
                f"{u:.2f}" if not math.isnan(u) else "-",
                bool(c.get("passed")),
                str(c.get("note") or ""),
            )
        )
    return out


def failures(records: Records, run_env: dict[str, Env]) -> tuple[list[FailureView], list[FailureView]]:
    """(failures with a shrunk case or a repro file, and up to MAX_OTHER_FAILURES other failing examples)."""
    main, other = [], []
    for rec in records.cases:
        if rec.get("passed"):
            continue
        path = failure_file(rec, records.roots)
        view = FailureView(
            "case",
            str(rec.get("implementation")),
            run_env[rec["run_id"]].label,
            rec["run_id"],
            case_text(rec.get("case")),
            json.dumps(rec.get("case"), indent=1, sort_keys=True),
            failure_line(rec),
            rec.get("error"),
            rec.get("traceback"),
            _comparison_views(rec),
            repro_command(path),
            bool(rec.get("shrunk")),
        )
        (main if rec.get("shrunk") or path else other).append(view)
    for rec in records.compiles:
        if rec.get("ok"):
            continue
        impl, topology, shape, pass_ = compile_key(rec)
        main.append(
            FailureView(
                "compile",
                impl,
                run_env[rec["run_id"]].label,
                rec["run_id"],
                f"compile {pass_} of shape {shape} for {topology}",
                json.dumps(
                    (rec.get("shape") or {}).get("case") if isinstance(rec.get("shape"), dict) else None,
                    indent=1,
                    sort_keys=True,
                ),
                failure_line(rec),
                rec.get("error"),
                rec.get("traceback"),
                [],
                repro_command(failure_file(rec, records.roots)),
                False,
            )
        )
    main.sort(key=lambda f: (f.kind, f.implementation, f.env, f.title))
    return main, other[:MAX_OTHER_FAILURES]


# --- runs ---


@dataclasses.dataclass
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


def _started(run_id: str) -> str:
    m = re.match(r"(\d{8}T\d{6}Z)", run_id)
    if not m:
        return "?"
    return dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%d %H:%M UTC")


def runs(records: Records, run_env: dict[str, Env], sides: dict[str, str]) -> list[RunView]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for kind, group in (("cases", records.cases), ("bench", records.benches), ("compile", records.compiles)):
        for r in group:
            counts[r["run_id"]][kind] += 1
    out = []
    for run_id in sorted(records.run_ids, key=lambda r: (_started(r), r)):
        run = records.runs.get(run_id, {})
        cmd = run.get("command")
        out.append(
            RunView(
                run_id,
                _started(run_id),
                str(run.get("status", "no run.json")),
                str(run.get("profile", "")),
                " ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd or ""),
                run_env[run_id].label,
                sorted((str(k), str(v)) for k, v in (run.get("versions") or {}).items()),
                sorted((str(k), str(v)) for k, v in (run.get("machine") or {}).items()),
                ", ".join(f"{n} {k}" for k, n in counts[run_id].items()) or "no records",
                sides.get(run_id, ""),
            )
        )
    return out


# --- the whole report ---


@dataclasses.dataclass
class Verdict:
    status: str  # "pass", "fail" (failures, no baseline) or "regression" (the gate failed)
    headline: str
    details: list[str]
    baseline: str | None


@dataclasses.dataclass
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


def verdict(current: Records, gate: GateResult | None) -> Verdict:
    failing = sum(not r.get("passed") for r in current.cases)
    compile_fail = sum(not r.get("ok") for r in current.compiles)
    details = []
    if failing:
        details.append(f"{failing} failing case record{'s' if failing != 1 else ''}")
    if compile_fail:
        details.append(f"{compile_fail} failed compile check{'s' if compile_fail != 1 else ''}")
    if gate is not None:
        if gate.failed:
            details = [f"{r.category}: {r.subject}: {r.change}" for r in gate.failures] + details
            return Verdict("regression", gate.summary(), details, gate.baseline)
        return Verdict("pass", gate.summary(), details, gate.baseline)
    if not (current.cases or current.benches or current.compiles):
        return Verdict("fail", "NO RECORDS: nothing was run", details, None)
    if failing or compile_fail:
        return Verdict("fail", "FAILURES: " + ", ".join(details), details, None)
    n = len(current.cases)
    return Verdict("pass", f"PASS: {n} case records, no failure", details, None)


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
    return Report(
        title=title,
        generated=(now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        sources=[str(r) for r in records.roots],
        verdict=verdict(current, gate),
        gate=gate,
        counts={
            "runs": len(records.run_ids),
            "case records": len(records.cases),
            "bench records": len(records.benches),
            "compile records": len(records.compiles),
        },
        matrix=matrix(current.cases, uses),
        matrix_scope="the candidate's records" if current is not records else "every record",
        histograms=histograms(current.cases, uses),
        envs=envs,
        correctness=correctness_by_version(records.cases, envs, run_env, uses),
        speed=speed_by_version(records.benches, envs, run_env, thresholds),
        memory=memory_by_version(records.compiles, envs, run_env, thresholds),
        failures=main,
        other_failures=other,
        other_failures_total=sum(not r.get("passed") for r in records.cases) - sum(f.kind == "case" for f in main),
        conventions=conventions[0],
        conventions_source=conventions[1],
        runs=runs(records, run_env, sides or {}),
        problems=records.problems,
        thresholds=thresholds,
    )
