"""Outline rows of the gate: the program around the kernel (harness.store.outline), baseline against candidate.

Per compile both sides made, one row: worse when an op kind around the kernels moves more bytes
than the baseline's by more than GROWTH and MIN_BYTES (an op added or grown: a copy of k, a
transpose), or when a kernel call that had a name a profiler shows is anonymous in the candidate.
The detail names each grown kind with its bytes and the candidate's ops of that kind.
"""

from __future__ import annotations

import functools
import re

from harness.gate.rows import Row, Status, grouped
from harness.gate.thresholds import fmt_bytes
from harness.store.outline import KernelCall, Op, Outline
from harness.store.read import Records, compile_key
from harness.store.records import CompileRecord

CATEGORY = "outline"
# A compiled program is deterministic for one library version: the same kernel compiled twice moves
# the same bytes, so any growth is real. 5% (memory's temp_bytes limit) lets an upgrade move a small
# fusion's edge; MIN_BYTES keeps scalar bookkeeping out: the smallest whole operand of the benchmark
# shapes (k of mha_f32_256) is 256 KiB, so a whole-tensor copy of any operand is above it.
GROWTH = 0.05
MIN_BYTES = 64 * 2**10


def _outline(recs: list[CompileRecord]) -> Outline | None:
    """The outline one side recorded for a compile (its first readable one), None when none."""
    return next((r.outline for r in recs if r.ok and r.outline is not None), None)


def grown(b: Outline, c: Outline) -> list[str]:
    """One phrase per op kind the candidate moves more bytes with than the limits allow."""
    out = []
    b_kinds, c_kinds = b.by_kind(), c.by_kind()
    for kind, ct in c_kinds.items():
        bt = b_kinds.get(kind)
        before = bt.bytes if bt else 0
        if ct.bytes - before <= MIN_BYTES or ct.bytes <= before * (1 + GROWTH):
            continue
        added = "added" if bt is None else f"{bt.count} -> {ct.count} ops"
        ops = [op for op in c.ops if op.kind == kind]
        out.append(
            f"{kind} {added}, {fmt_bytes(before)} -> {fmt_bytes(ct.bytes)} moved "
            f"(+{fmt_bytes(ct.bytes - before)}): {', '.join(map(_op_text, ops[:4]))}"
            + (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
        )
    return out


def _op_text(op: Op) -> str:
    relayout = " relayout" if op.relayout else ""
    shape = re.match(r"\(?(\w+\[[\d,]*\])", op.shape)  # the result's (an async copy's: its destination)
    shape = shape[1] if shape else op.shape
    return f"{op.name} {shape}{relayout} reads {fmt_bytes(op.bytes_read)} writes {fmt_bytes(op.bytes_written)}"


def lost_names(b: Outline, c: Outline) -> list[str]:
    """Kernel calls, matched in program order, named in the baseline and anonymous in the candidate."""
    pairs = zip(b.kernels, c.kernels, strict=False)  # a kernel added or dropped is codegen's to say
    return [f"{bk.label} -> {ck.label}" for bk, ck in pairs if not bk.anonymous and ck.anonymous]


def _figure(o: Outline) -> str:
    return f"{fmt_bytes(o.outside_bytes)} outside ({o.outside_share:.0%})"


def _names(kernels: tuple[KernelCall, ...]) -> str:
    return ", ".join(k.label for k in kernels) or "no kernel call"


def outline_rows(base: Records, cand: Records) -> list[Row]:
    """One row per compile both sides outlined (records from before the outline are left out)."""
    rows = []
    b_all, c_all = grouped(base.compiles, compile_key), grouped(cand.compiles, compile_key)
    for key in sorted(set(b_all) & set(c_all)):
        b, c = _outline(b_all[key]), _outline(c_all[key])
        if b is None or c is None:
            continue
        impl, topology, shape, pass_ = key
        row = functools.partial(
            Row,
            category=CATEGORY,
            subject=f"{impl} {pass_} {shape} on {topology} outline",
            baseline=_figure(b),
            candidate=_figure(c),
        )
        more, lost = grown(b, c), lost_names(b, c)
        if not (more or lost):
            rows.append(row(status=Status.UNCHANGED, change="no op grew around the kernel", detail=_names(c.kernels)))
            continue
        change = "; ".join(
            ([f"{len(more)} op kind{'s' if len(more) != 1 else ''} grew"] if more else [])
            + ([f"{len(lost)} kernel name{'s' if len(lost) != 1 else ''} lost"] if lost else [])
        )
        detail = " | ".join(
            [f"around the kernel: {g}" for g in more]
            + [f"kernel lost its name (a profiler shows it anonymous): {n}" for n in lost]
        )
        limit = f"; limit +{GROWTH:.0%} and {fmt_bytes(MIN_BYTES)} per op kind" if more else ""
        rows.append(row(status=Status.WORSE, change=change, detail=detail + limit, fails=True))
    return rows
