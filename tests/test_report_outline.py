"""The report's program outlines per version and its links to `profile` traces (harness.report.outline)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.gate import thresholds
from harness.report import compose
from harness.store.outline import KernelCall, Op, Outline
from harness.store.read import load
from harness.store.records import CompileRecord
from tests import record_builders as rb

OLD, NEW = "20261204T000000Z-ci-aaaaaa", "20261204T010000Z-ci-bbbbbb"
KERNEL = KernelCall(
    name="flash_attention.1", kernel_name="_flash_attention_kernel", bytes_read=3 << 20, bytes_written=1 << 20
)
COPY = Op(
    name="copy",
    kind="copy",
    shape="f32[1,2,256,128]{2,3,1,0}",
    bytes_read=1 << 20,
    bytes_written=1 << 20,
    relayout=True,
)


def _compile(run_id: str, outline: Outline) -> dict:
    rec = CompileRecord.from_json(rb.compile_record(run_id))
    return dataclasses.replace(rec, outline=outline).to_json()


def test_the_report_shows_the_outline_per_version_and_links_each_trace(tmp_path: Path) -> None:
    trace = tmp_path / "traces" / OLD / "pallas_flash--mha_f32_256--fwd" / "vm.trace.json.gz"
    profile_run = rb.run_record(
        OLD,
        traces=[
            {"scope": "pallas_flash fwd mha_f32_256", "backend": "tpu_interpret", "files": [str(trace)], "error": None}
        ],
    )
    store = rb.write_store(
        tmp_path,
        [
            profile_run,
            rb.run_record(NEW, versions={"jax": "0.10.3"}),
            _compile(OLD, Outline(kernels=(KERNEL,))),
            _compile(NEW, Outline(kernels=(KERNEL,), ops=(COPY,))),
        ],
    )
    report, _ = compose.make(load([store]), thresholds=thresholds.load(None))
    (row,) = report.outlines
    assert (row.group, row.label) == ("v5e:1x1", "pallas_flash fwd mha_f32_256")
    assert [c.text for c in row.cells] == ["0 B (0%)", "2.00 MiB (33%)"]
    assert row.cells[1].movement.text == "more outside" and "copy x1 2.00 MiB" in row.cells[1].detail
    html = compose.write(report, tmp_path / "index.html").read_text()
    assert "Around the kernels" in html and f'href="{trace.as_uri()}"' in html
