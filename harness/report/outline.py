"""The report's program outlines per version (harness.store.outline) and the traces `profile` wrote."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

from harness.gate.thresholds import fmt_bytes
from harness.report.versions import Env, Movement, SeriesCell, SeriesRow
from harness.store.read import Records, compile_key
from harness.store.records import CompileRecord


def outline_by_version(compiles: list[CompileRecord], envs: list[Env], run_env: dict[str, Env]) -> list[SeriesRow]:
    """Per compile and TPU generation: the bytes moved outside the kernels and their share, per
    environment, marked where they grew or a kernel became anonymous."""
    groups: dict[tuple[str, ...], dict[str, CompileRecord]] = defaultdict(dict)
    for rec in compiles:
        if rec.ok and rec.outline is not None:
            impl, topology, shape, pass_ = compile_key(rec)
            groups[(topology, impl, pass_, shape)].setdefault(run_env[rec.run_id].label, rec)
    rows = []
    for key in sorted(groups):
        topology, impl, pass_, shape = key
        cells, prev = [], None
        for env in envs:
            rec = groups[key].get(env.label)
            if rec is None or rec.outline is None:
                cells.append(SeriesCell(value=None, text="-", detail="no outline recorded", movement=None))
                continue
            o = rec.outline
            anonymous = [k.label for k in o.kernels if k.anonymous]
            kinds = ", ".join(f"{t.kind} x{t.count} {fmt_bytes(t.bytes)}" for t in o.by_kind().values())
            detail = f"kernels: {', '.join(k.label for k in o.kernels) or 'none'}; around them: {kinds or 'nothing'}"
            mv = None
            if prev is not None:
                grew, named = (
                    o.outside_bytes > prev.outside_bytes,
                    len(anonymous) > sum(k.anonymous for k in prev.kernels),
                )
                mv = Movement(
                    "more outside" if grew else "anonymous" if named else "same", "worse" if grew or named else "same"
                )
            text = f"{fmt_bytes(o.outside_bytes)} ({o.outside_share:.0%})" + (" ANONYMOUS" if anonymous else "")
            cells.append(SeriesCell(value=float(o.outside_bytes), text=text, detail=detail, movement=mv))
            prev = o
        rows.append(SeriesRow(label=f"{impl} {pass_} {shape}", group=topology, plot="", name=impl, cells=cells))
    return rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class TraceLink:
    """One trace a `profile` run wrote: what it traced, where, and the file to open."""

    run_id: str
    scope: str  # "pallas_flash fwd mha_f32_256"
    backend: str
    path: str  # the .trace.json.gz (Perfetto), else the trace directory
    error: str | None

    @property
    def uri(self) -> str:
        return Path(self.path).resolve().as_uri()


def traces(records: Records) -> list[TraceLink]:
    """Every trace the runs' run.json list (`profile` writes them under "traces")."""
    out = []
    for run_id, run in sorted(records.runs.items()):
        for t in run.traces:
            files = [f for f in t.get("files") or [] if str(f).endswith(".trace.json.gz")]
            out.append(
                TraceLink(
                    run_id=run_id,
                    scope=str(t.get("scope", "")),
                    backend=str(t.get("backend", "")),
                    path=str(files[0] if files else t.get("trace_dir", "")),
                    error=t.get("error"),
                )
            )
    return out
