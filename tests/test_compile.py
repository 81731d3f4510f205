"""Ahead-of-time TPU compile checks: the real Mosaic compiler on a compile-only v5e, no TPU needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.core import contract
from harness.core.case import Case
from harness.core.shapes import SHAPES, BenchShape
from harness.store.files import iter_records
from harness.tpu import compile as aot

pytest.importorskip("libtpu", reason="compile checks need libtpu (pip install .[tpu])")

TINY = BenchShape("tiny", Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=128, dtype="float32"))


def test_flash_forward_compiles_for_v5e_with_memory_and_cost() -> None:
    r = aot.compile_one(contract.resolve("pallas_flash"), TINY, "v5e:1x1", "fwd")
    assert r.ok, r.error
    itemsize = 4
    q_bytes = 1 * 1 * 128 * 128 * itemsize
    assert r.memory["argument"] == 3 * q_bytes  # q, k, v
    assert r.memory["output"] == q_bytes
    assert r.memory["generated_code"] > 0
    assert r.cost["flops"] > 0 and r.cost["bytes_accessed"] > 0


def test_a_compile_failure_is_recorded_with_its_case_file(tmp_path: Path) -> None:
    # A topology the compiler cannot target fails (in some libtpu releases by aborting the
    # process: compile_all's child process turns that into a failed result too).
    code = main(
        ["compile", "--topology", "v5e:9x9x9", "--shape", "mha_f32_256", "--pass", "fwd", "--out", str(tmp_path)]
    )
    assert code == 1
    (rec,) = [r for r in iter_records(tmp_path) if r["kind"] == "compile"]
    assert not rec["ok"] and rec["error"]
    failure = Path(rec["failure_file"])
    assert failure.parent == tmp_path / "failures" and failure.is_file()
    assert "--topology v5e:9x9x9" in failure.read_text()


def test_compile_command_records_one_compile_record_per_topology_and_pass(tmp_path: Path) -> None:
    code = main(["compile", "--topology", "v5e:1x1", "--shape", "mha_f32_256", "--out", str(tmp_path)])
    assert code == 0
    recs = [r for r in iter_records(tmp_path) if r["kind"] == "compile"]
    assert sorted(r["pass"] for r in recs) == ["fwd", "fwd_bwd"]
    assert all(r["ok"] and r["memory"]["argument"] > 0 and r["topology"] == "v5e:1x1" for r in recs)
    (meta,) = [r for r in iter_records(tmp_path) if r["kind"] == "run"]
    assert meta["versions"]["jax"] and meta["status"] == "finished"


def test_unknown_shape_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--shape", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown shape" in capsys.readouterr().err


def test_benchmark_shapes_are_inside_the_kernel_contract() -> None:
    flash = contract.resolve("pallas_flash")
    assert all(not flash.violations(s.case) for s in SHAPES.values())
