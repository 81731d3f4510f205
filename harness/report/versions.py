"""The report's per-library-version tables: environments in version order, and how each figure moved.

Pure: records in, rows out. A speed move counts only past the gate's Mann-Whitney test and
factor; compiled memory is deterministic, so any move is real and is judged by the gate's limit.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from typing import Any

from harness.core.numbers import multiple
from harness.gate import SpeedComparison, compare_samples, fmt_seconds, process_samples, stats
from harness.gate.thresholds import Limit, Thresholds, fmt_bytes
from harness.store.derive import Uses, failure_line
from harness.store.derive import record_uses as _uses
from harness.store.read import Records, bench_key, compile_key, generation
from harness.store.records import BenchRecord, CaseRecord, CompileRecord
from harness.tpu import mosaic
from harness.tpu.mosaic import STAGES, KernelBody

# Libraries whose versions name an environment, most significant first.
VERSION_ORDER = ("jax", "jaxlib", "libtpu", "torch", "python", "numpy", "hypothesis", "harness")


@dataclasses.dataclass(kw_only=True)
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
        run = records.runs.get(run_id)
        versions = {k: str(v) for k, v in (run.versions if run is not None else {}).items() if v is not None}
        key = tuple(sorted(versions.items()))
        env = envs.setdefault(key, Env(key=key, versions=versions))
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


@dataclasses.dataclass
class Movement:
    """How a figure moved from the previous environment: text, and a css class (worse/better/moved/same/na)."""

    text: str
    css: str
    beyond_noise: bool = False


@dataclasses.dataclass(kw_only=True)
class CorrectnessRow:
    implementation: str
    env: str
    cases: int
    failed: int
    worst_used: float
    median_used: float
    movement: Movement


@dataclasses.dataclass(kw_only=True)
class SeriesCell:
    value: float | None  # the figure (median seconds, or bytes)
    text: str
    detail: str  # hover text: spread, samples
    movement: Movement | None


@dataclasses.dataclass(kw_only=True)
class SeriesRow:
    label: str  # implementation, shape, pass
    group: str  # backend (speed) or TPU generation (memory)
    plot: str  # the plot this series is drawn in
    name: str  # its name in that plot's legend
    cells: list[SeriesCell]  # one per environment
    lows: list[float | None] = dataclasses.field(default_factory=list)
    highs: list[float | None] = dataclasses.field(default_factory=list)


def correctness_by_version(
    cases: list[CaseRecord], envs: list[Env], run_env: dict[str, Env], uses: Uses | None = None
) -> list[CorrectnessRow]:
    groups: dict[tuple[str, str], list[CaseRecord]] = defaultdict(list)
    for rec in cases:
        groups[(rec.implementation, run_env[rec.run_id].label)].append(rec)
    rows = []
    for impl in sorted({k[0] for k in groups}):
        prev: tuple[int, float] | None = None
        for env in envs:
            recs = groups.get((impl, env.label))
            if not recs:
                continue
            ratios = [u for r in recs for u in _uses(r, uses) if not math.isnan(u)]
            failed = sum(not r.passed for r in recs)
            worst = max(ratios, default=math.nan)
            if prev is None:
                mv = Movement("first version", "na")
            elif failed != prev[0]:
                mv = Movement(f"{failed - prev[0]:+d} failing", "worse" if failed > prev[0] else "better", True)
            elif math.isclose(worst, prev[1], rel_tol=0.01) or (math.isnan(worst) and math.isnan(prev[1])):
                mv = Movement("no change", "same")
            else:
                mv = Movement(f"worst {multiple(prev[1])} -> {multiple(worst)}", "same")
            rows.append(
                CorrectnessRow(
                    implementation=impl,
                    env=env.label,
                    cases=len(recs),
                    failed=failed,
                    worst_used=worst,
                    median_used=stats.median(ratios) if ratios else math.nan,
                    movement=mv,
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


def _timing_cells(
    by_env: dict[str, list[float]], envs: list[Env], th: Thresholds, *, where: str = ""
) -> tuple[list[SeriesCell], list[float | None], list[float | None]]:
    """One cell per environment from its timing samples (median, quartiles), each moved against the
    previous environment's samples by the gate's rule `th`; with the quartiles as the plot's band."""
    cells: list[SeriesCell] = []
    lows: list[float | None] = []
    highs: list[float | None] = []
    prev: list[float] | None = None
    for env in envs:
        xs = by_env.get(env.label)
        if not xs:
            cells.append(SeriesCell(value=None, text="-", detail="not timed", movement=None))
            lows.append(None)
            highs.append(None)
            continue
        s = stats.summarize(xs)
        mv = None if prev is None else _speed_movement(compare_samples(prev, xs, th), th)
        n = f"n={s.n}" + (f" ({where})" if where else "")
        detail = f"{n}, quartiles {fmt_seconds(s.q1)} .. {fmt_seconds(s.q3)}, min {fmt_seconds(s.min)}"
        cells.append(SeriesCell(value=s.median, text=fmt_seconds(s.median), detail=detail, movement=mv))
        lows.append(s.q1)
        highs.append(s.q3)
        prev = xs
    return cells, lows, highs


def speed_by_version(
    benches: list[BenchRecord], envs: list[Env], run_env: dict[str, Env], th: Thresholds
) -> list[SeriesRow]:
    groups: dict[tuple[str, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in benches:
        groups[bench_key(rec)][run_env[rec.run_id].label].extend(process_samples([rec]))  # one per process, as the gate
    rows = []
    for key in sorted(groups):
        impl, shape, pass_, where = key
        cells, lows, highs = _timing_cells(groups[key], envs, th)
        rows.append(
            SeriesRow(
                label=f"{impl} {pass_} {shape}",
                group=where,
                plot=f"{pass_} on {where}",
                name=f"{impl} {shape}",
                cells=cells,
                lows=lows,
                highs=highs,
            )
        )
    return rows


def _temp_movement(prev: float, temp: float, limit: Limit | None) -> Movement:
    """How compiled temp memory moved from the previous version's, judged by the gate's temp limit."""
    change = temp / prev - 1 if prev else (0.0 if temp == 0 else math.inf)
    if limit is None:
        return Movement(f"{change:+.1%}", "same" if change == 0 else "na", change != 0)
    out = limit.check(prev, temp)
    css = {"worse": "worse", "better": "better", "unchanged": "same"}[out.status]
    return Movement(f"{change:+.1%}" if math.isfinite(change) else "from 0", css, out.status != "unchanged")


def memory_by_version(
    compiles: list[CompileRecord], envs: list[Env], run_env: dict[str, Env], th: Thresholds
) -> list[SeriesRow]:
    """Compiled temp memory per TPU generation, shape and pass, moved against the gate's temp limit."""
    groups: dict[tuple[str, ...], dict[str, list[CompileRecord]]] = defaultdict(lambda: defaultdict(list))
    for rec in compiles:
        groups[compile_key(rec)][run_env[rec.run_id].label].append(rec)
    limit = next((lim for lim in th.limits if lim.field == "temp_bytes"), None)
    rows = []
    for key in sorted(groups, key=lambda k: (generation(k[1]), k)):
        impl, topology, shape, pass_ = key
        cells = []
        prev: float | None = None
        for env in envs:
            recs = groups[key].get(env.label)
            if not recs:
                cells.append(SeriesCell(value=None, text="-", detail="not compiled", movement=None))
                continue
            if not all(r.ok for r in recs):
                bad = next(r for r in recs if not r.ok)
                cells.append(
                    SeriesCell(
                        value=None,
                        text="FAILS",
                        detail=failure_line(bad),
                        movement=Movement("compile fails", "worse", True),
                    )
                )
                prev = None
                continue
            temps = [float(t) for r in recs if (t := (r.memory or {}).get("temp")) is not None]
            if not temps:
                cells.append(SeriesCell(value=None, text="?", detail="no memory figures recorded", movement=None))
                continue
            temp = stats.median(temps)
            mem = recs[0].memory or {}
            total = sum(float(mem.get(k) or 0) for k in ("argument", "output", "temp", "generated_code"))
            detail = ", ".join(f"{k} {fmt_bytes(float(v))}" for k, v in mem.items() if v is not None)
            mv = None if prev is None else _temp_movement(prev, temp, limit)
            cells.append(
                SeriesCell(value=temp, text=fmt_bytes(temp), detail=f"{detail}; total {fmt_bytes(total)}", movement=mv)
            )
            prev = temp
        gen = generation(topology)
        rows.append(
            SeriesRow(
                label=f"{impl} {pass_} {shape}",
                group=f"{gen} ({topology})",
                plot=gen,
                name=f"{impl} {pass_} {shape}",
                cells=cells,
            )
        )
    return rows


def compile_time_by_version(
    compiles: list[CompileRecord], envs: list[Env], run_env: dict[str, Env], th: Thresholds
) -> list[SeriesRow]:
    """Trace, lowering and compile seconds per kernel, shape and pass, every TPU generation's samples
    together (tracing and lowering do not depend on it), moved by the gate's compile-time rule."""
    groups: dict[tuple[str, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in compiles:
        impl, _, shape, pass_ = compile_key(rec)
        for stage, xs in (rec.samples or {}).items():
            groups[(stage, impl, pass_, shape)][run_env[rec.run_id].label].extend(xs)
    judged = dataclasses.replace(th, factor=th.compile_time_factor)
    rows = []
    for key in sorted(groups, key=lambda k: (STAGES.index(k[0]) if k[0] in STAGES else len(STAGES), k)):
        stage, impl, pass_, shape = key
        cells, lows, highs = _timing_cells(groups[key], envs, judged, where="fresh processes, every generation")
        rows.append(
            SeriesRow(
                label=f"{impl} {pass_} {shape}",
                group=stage,
                plot=f"{STAGES.index(stage) + 1 if stage in STAGES else 9}. {stage} time",
                name=f"{impl} {pass_} {shape}",
                cells=cells,
                lows=lows,
                highs=highs,
            )
        )
    return rows


def kernels_by_version(compiles: list[CompileRecord], envs: list[Env], run_env: dict[str, Env]) -> list[SeriesRow]:
    """The Mosaic kernel bodies each compile lowered to (harness.tpu.mosaic): their digest per
    environment, marked where it changed from the previous one."""
    groups: dict[tuple[str, ...], dict[str, list[CompileRecord]]] = defaultdict(lambda: defaultdict(list))
    for rec in compiles:
        if rec.ok and rec.kernels:
            impl, _, shape, pass_ = compile_key(rec)
            groups[(impl, pass_, shape)][run_env[rec.run_id].label].append(rec)
    rows = []
    for key in sorted(groups):
        impl, pass_, shape = key
        cells = []
        prev: str | None = None
        for env in envs:
            recs = groups[key].get(env.label)
            if not recs:
                cells.append(SeriesCell(value=None, text="-", detail="no kernel bodies recorded", movement=None))
                continue
            bodies = [KernelBody.from_json(k) for k in recs[0].kernels]
            digest = mosaic.digest(bodies) or "-"
            size = sum(b.size for b in bodies)
            varies = {mosaic.digest([KernelBody.from_json(k) for k in r.kernels]) for r in recs} != {digest}
            detail = f"{len(bodies)} kernels, {size} bytes" + ("; other runs lowered other bodies" if varies else "")
            mv = None
            if prev is not None:
                mv = Movement("changed", "moved", True) if digest != prev else Movement("same code", "same")
            cells.append(SeriesCell(value=None, text=f"{digest[:10]} ({size / 1024:.1f}K)", detail=detail, movement=mv))
            prev = digest
        rows.append(SeriesRow(label=f"{impl} {pass_} {shape}", group="Mosaic", plot="", name=impl, cells=cells))
    return rows
