"""Codegen rows: the Mosaic kernel bodies a compile lowered to, changed between the sides."""

from __future__ import annotations

import dataclasses
import functools

from harness.gate.rows import Row, Status, grouped
from harness.store.read import Records, compile_key
from harness.store.records import CompileRecord
from harness.tpu import mosaic
from harness.tpu.mosaic import KernelBody


def _bodies(recs: list[CompileRecord]) -> list[KernelBody] | None:
    """The kernel bodies one side's records agree on, or None when they recorded none."""
    found = [r.kernels for r in recs if r.kernels]
    return [KernelBody.from_json(k) for k in found[0]] if found else None


def codegen_changes(base: Records, cand: Records) -> list[CodegenChange]:
    """Every compile whose Mosaic kernel bodies differ between the sides (either side lowered once
    is enough: bodies do not depend on the topology, harness.tpu.mosaic)."""
    out = []
    b_all, c_all = grouped(base.compiles, compile_key), grouped(cand.compiles, compile_key)
    for key in sorted(set(b_all) & set(c_all)):
        b, c = _bodies(b_all[key]), _bodies(c_all[key])
        if b is None or c is None or mosaic.digest(b) == mosaic.digest(c):
            continue
        impl, topology, shape, pass_ = key
        out.append(CodegenChange(subject=f"{impl} {pass_} {shape} on {topology}", before=b, after=c))
    return out


def codegen_rows(changes: list[CodegenChange], base: Records, cand: Records, others: list[Row]) -> list[Row]:
    """One row per compile whose kernels changed: informational, unless a memory or compile-time row
    of the same compile got worse (then the changed code is named as its likely cause, and fails)."""
    rows = []
    changed = {ch.subject: ch for ch in changes}
    b_all, c_all = grouped(base.compiles, compile_key), grouped(cand.compiles, compile_key)
    for key in sorted(set(b_all) & set(c_all)):
        impl, topology, shape, pass_ = key
        subject = f"{impl} {pass_} {shape} on {topology}"
        b, c = _bodies(b_all[key]), _bodies(c_all[key])
        if b is None or c is None:
            continue
        row = functools.partial(Row, category="codegen", subject=subject)
        fig = lambda bodies: f"{mosaic.digest(bodies)[:12]} ({sum(k.size for k in bodies)} B)"  # noqa: E731  # pragma: no mutate
        if subject not in changed:
            rows.append(row(status=Status.UNCHANGED, baseline=fig(b), candidate=fig(c), change="same kernel bodies"))
            continue
        worse = [r for r in others if r.fails and r.subject.startswith(subject + " ")]
        estimate = _estimate_change(b, c)
        with_it = (
            f"; with it: {', '.join(r.subject[len(subject) + 1 :] for r in worse)} worse" if worse else ""
        )  # pragma: no mutate
        rows.append(
            row(
                status=Status.WORSE if worse else Status.CHANGED,
                baseline=fig(b),  # pragma: no mutate
                candidate=fig(c),  # pragma: no mutate
                change="code generation changed",  # pragma: no mutate
                detail=f"{len(b)} -> {len(c)} kernels{estimate}{with_it}; diff in the report",  # pragma: no mutate
                fails=bool(worse),
            )
        )
    return rows


def _estimate_change(b: list[KernelBody], c: list[KernelBody]) -> str:  # pragma: no mutate block
    """The kernels' own declared cost estimates, summed, where they moved."""

    def total(bodies: list[KernelBody], field: str) -> float:
        return sum(float((k.cost_estimate or {}).get(field) or 0) for k in bodies)

    moved = [
        f"declared {f} {total(b, f):.3g} -> {total(c, f):.3g}"
        for f in ("flops", "transcendentals", "bytes_accessed")
        if total(b, f) != total(c, f)
    ]
    return f"; {', '.join(moved)}" if moved else ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CodegenChange:
    """One compile whose kernel bodies differ: both sides' bodies, for the report's diff."""

    subject: str
    before: list[KernelBody]
    after: list[KernelBody]

    def diff(self) -> str:
        return mosaic.diff(self.before, self.after)
