"""The gate's compile-time and code-generation rows (harness.gate): stage times judged on their samples,
changed Mosaic kernel bodies listed, and failing only when a worse figure of the same compile comes with them."""

from __future__ import annotations

import base64
import dataclasses
import zlib

import pytest

from harness import gate
from harness.cli import main
from harness.gate import thresholds
from harness.store.read import Records, load
from harness.tpu import mosaic
from tests import record_builders as rb

BASE, CAND = "20261129T100000Z-ci-aaaaaa", "20261129T110000Z-ci-bbbbbb"
SUBJECT = "pallas_flash fwd mha_f32_256 on v5e:1x1"


def _records(*recs: dict) -> Records:
    out = Records()
    for r in recs:
        out.add(r, "test")
    return out


def _samples(trace: float, n: int = 5) -> dict[str, list[float]]:
    """`n` samples per stage; trace around `trace` seconds, lower and compile as the builders' default."""
    spread = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97][:n]
    return {stage: [t * s for s in spread] for stage, t in (("trace", trace), ("lower", 0.1), ("compile", 0.1))}


def _kernel(text: str, *, flops: float = 6.75e7) -> dict:
    body = text.encode()
    return mosaic.KernelBody(
        sha256=mosaic.hashlib.sha256(body).hexdigest(),
        size=len(body),
        cost_estimate={"flops": flops},
        text_z=base64.b64encode(zlib.compress(body)).decode(),
    ).to_json()


TH = thresholds.load(None)


def test_a_trace_several_times_slower_fails_and_the_other_stages_are_unchanged() -> None:
    b = _records(rb.compile_record(BASE, samples=_samples(0.1)))
    c = _records(rb.compile_record(CAND, samples=_samples(0.4)))
    rows = {r.subject: r for r in gate.compile_time_rows(b, c, TH)}
    assert set(rows) == {f"{SUBJECT} {stage}" for stage in mosaic.STAGES}
    trace = rows[f"{SUBJECT} trace"]
    assert trace.category == "compile time" and trace.status == "worse" and trace.fails
    assert "4.00x slower" in trace.detail and "beyond factor 1.5" in trace.detail
    assert [rows[f"{SUBJECT} {s}"].status for s in ("lower", "compile")] == ["unchanged", "unchanged"]


def test_compile_times_move_within_their_factor_as_noise() -> None:
    # 1.3x is beyond the speed factor (1.10) but within compile_time.factor (1.5): compile times
    # of fresh processes on a shared machine move that much (gate_thresholds.toml).
    b = _records(rb.compile_record(BASE, samples=_samples(0.1)))
    c = _records(rb.compile_record(CAND, samples=_samples(0.13)))
    trace = next(r for r in gate.compile_time_rows(b, c, TH) if r.subject.endswith("trace"))
    assert trace.status == "unchanged" and "within factor 1.5" in trace.detail


def test_too_few_samples_are_never_judged() -> None:
    b = _records(rb.compile_record(BASE, samples=_samples(0.1, n=3)))
    c = _records(rb.compile_record(CAND, samples=_samples(1.0, n=3)))  # ten times slower, 3 samples each
    rows = gate.compile_time_rows(b, c, TH)
    assert {r.status for r in rows} == {"insufficient"} and not any(r.fails for r in rows)


def test_records_from_before_stage_times_are_not_compared() -> None:
    b = _records(rb.compile_record(BASE, samples={}))
    c = _records(rb.compile_record(CAND))
    assert gate.compile_time_rows(b, c, TH) == []


def test_changed_kernel_bodies_are_listed_informational_with_their_diff() -> None:
    before = _kernel("func.func @main() {\n  %0 = tpu.iota\n  return\n}")
    after = _kernel("func.func @main() {\n  %0 = tpu.iota\n  %1 = tpu.iota\n  return\n}", flops=1.35e8)
    b = _records(rb.compile_record(BASE, kernels=[before]), rb.compile_record(BASE, topology="v4:1x1x1"))
    c = _records(rb.compile_record(CAND, kernels=[after]), rb.compile_record(CAND, topology="v4:1x1x1"))
    result = gate.compare(b, c, TH)
    rows = {r.subject: r for r in result.rows if r.category == "codegen"}
    changed = rows[SUBJECT]
    assert changed.status == "changed" and not changed.fails and changed.change == "code generation changed"
    assert "declared flops 6.75e+07 -> 1.35e+08" in changed.detail
    assert rows["pallas_flash fwd mha_f32_256 on v4:1x1x1"].status == "unchanged"
    assert not result.failed
    (ch,) = result.codegen
    assert ch.subject == SUBJECT and "+  %1 = tpu.iota" in ch.diff()


def test_the_same_code_lowered_in_two_virtualenvs_is_unchanged() -> None:
    # The serialized body carries the installed jax's absolute path (a source location): the matrix's two
    # jax 0.10.2 cells, identical texts, had different byte hashes and were listed as code generation changed.
    text = "func.func @main() {\n  return\n}"
    here, there = (dict(_kernel(text), sha256=mosaic.hashlib.sha256(p.encode()).hexdigest()) for p in ("/a", "/b"))
    b = _records(rb.compile_record(BASE, kernels=[here]))
    c = _records(rb.compile_record(CAND, kernels=[there]))
    (row,) = [r for r in gate.compare(b, c, TH).rows if r.category == "codegen"]
    assert row.status == "unchanged", row
    bodies = [mosaic.KernelBody.from_json(k) for k in (here, there)]
    assert mosaic.digest(bodies[:1]) == mosaic.digest(bodies[1:])
    # Without the text (a jax that cannot parse the body back) the bytes decide.
    blind = [dataclasses.replace(k, text_z=None) for k in bodies]
    assert mosaic.digest(blind[:1]) != mosaic.digest(blind[1:])


def test_changed_code_with_a_worse_figure_of_the_same_compile_fails() -> None:
    before, after = _kernel("a\nb"), _kernel("a\nc")
    b = _records(rb.compile_record(BASE, kernels=[before]))
    c = _records(rb.compile_record(CAND, kernels=[after], samples=_samples(0.4)))
    rows = {r.subject: r for r in gate.compare(b, c, TH).rows}
    changed = rows[SUBJECT]
    assert changed.status == "worse" and changed.fails
    assert "with it: trace worse" in changed.detail


TRACE_WORK = "tests.planted.trace_work:flash_attention"
NEW_BODY = "tests.planted.fwd_rescale_alpha:flash_attention"  # an edit of the kernel: other Mosaic code


def test_planted_drop_ins_fail_the_gate_on_trace_time_and_are_listed_as_code_generation_changes(tmp_path) -> None:
    pytest.importorskip("libtpu", reason="compile checks need libtpu (pip install .[tpu])")
    kernels = [x for spec in ("pallas_flash", TRACE_WORK, NEW_BODY) for x in ("--kernel", spec)]
    argv = ["compile", *kernels, "--shape", "mha_f32_256", "--topology", "v5e:1x1", "--pass", "fwd"]
    # The default --repeat: as many fresh processes as the gate needs samples to judge a time at all.
    assert main([*argv, "--out", str(tmp_path)]) == 0
    recs = load([tmp_path])
    # Upstream is compiled first in each process, so its times carry the process's one-off costs:
    # the comparison leans towards the drop-ins, and still must catch them.
    upstream = _only(recs, "pallas_flash")
    slow, other = (_only(recs, spec, rename=True) for spec in (TRACE_WORK, NEW_BODY))
    rows = {(r.category, r.subject): r for r in gate.compare(upstream, slow, TH).rows}
    trace = rows[("compile time", f"{SUBJECT} trace")]
    assert trace.status == "worse" and trace.fails, trace.detail
    assert rows[("codegen", SUBJECT)].status == "unchanged"  # the same kernel, traced at greater cost
    changed = gate.compare(upstream, other, TH)
    (row,) = [r for r in changed.rows if r.category == "codegen"]
    assert row.status == "changed" and not row.fails and row.change == "code generation changed"
    (ch,) = changed.codegen
    assert ch.diff().count("\n-") >= 1 and ch.diff().count("\n+") >= 1


def _only(recs: Records, implementation: str, *, rename: bool = False) -> Records:
    """The compile records of one implementation, renamed to the upstream kernel's as an upgrade's would be."""
    out = Records()
    out.compiles = [
        dataclasses.replace(r, implementation="pallas_flash") if rename else r
        for r in recs.compiles
        if r.implementation == implementation
    ]
    return out
