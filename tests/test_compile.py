"""Ahead-of-time TPU compile checks: the real Mosaic compiler on a compile-only v5e, no TPU needed."""

from __future__ import annotations

import dataclasses
import gc
import statistics
from pathlib import Path

import pytest

from harness.cli import main
from harness.core import contract
from harness.core.case import Case
from harness.core.shapes import SHAPES, BenchShape
from harness.store.files import iter_records
from harness.tpu import compile as aot
from harness.tpu import mosaic

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
        [
            "compile",
            *("--topology", "v5e:9x9x9", "--shape", "mha_f32_256", "--pass", "fwd", "--repeat", "1"),
            *("--out", str(tmp_path)),
        ]
    )
    assert code == 1
    (rec,) = [r for r in iter_records(tmp_path) if r["kind"] == "compile"]
    assert not rec["ok"] and rec["error"]
    failure = Path(rec["failure_file"])
    assert failure.parent == tmp_path / "failures" and failure.is_file()
    assert "--topology v5e:9x9x9" in failure.read_text()


def test_compile_command_records_one_compile_record_per_topology_and_pass(tmp_path: Path) -> None:
    argv = ["compile", "--topology", "v5e:1x1", "--shape", "mha_f32_256", "--repeat", "2", "--out", str(tmp_path)]
    assert main(argv) == 0
    recs = [r for r in iter_records(tmp_path) if r["kind"] == "compile"]
    assert sorted(r["pass"] for r in recs) == ["fwd", "fwd_bwd"]
    assert all(r["ok"] and r["memory"]["argument"] > 0 and r["topology"] == "v5e:1x1" for r in recs)
    # Two fresh processes: two samples of each stage, the recorded time their median, the same kernel bodies.
    for r in recs:
        assert {s: len(v) for s, v in r["samples"].items()} == dict.fromkeys(mosaic.STAGES, 2)
        assert r["times"] == {s: statistics.median(v) for s, v in r["samples"].items()}
        assert r["deterministic"] is True and r["kernels"]
    (meta,) = [r for r in iter_records(tmp_path) if r["kind"] == "run"]
    assert meta["versions"]["jax"] and meta["status"] == "finished"


def test_a_compile_times_each_stage_and_reads_the_mosaic_kernels_it_lowered_to() -> None:
    flash = contract.resolve("pallas_flash")
    fwd = aot.compile_one(flash, TINY, "v5e:1x1", "fwd")
    both = aot.compile_one(flash, TINY, "v5e:1x1", "fwd_bwd")
    assert fwd.ok and both.ok, (fwd.error, both.error)
    assert all(fwd.times[s] > 0 for s in mosaic.STAGES) and fwd.samples == {s: [fwd.times[s]] for s in mosaic.STAGES}
    (body,) = [mosaic.KernelBody.from_json(k) for k in fwd.kernels]  # the forward kernel
    assert len(both.kernels) == 3  # forward, dkv and dq kernels
    assert body.size > 0 and len(body.sha256) == 64
    # The kernel's own declared estimate (pl.CostEstimate), beside XLA's: flops of QK^T and PV at least.
    assert body.cost_estimate["flops"] >= 2 * 2 * 128 * 128 * 128
    assert "func.func" in body.text
    # Under the VJP the forward saves its residuals (another kernel), then dkv and dq: three distinct bodies.
    assert len({k["sha256"] for k in both.kernels} | {body.sha256}) == 4


def test_the_stages_are_timed_with_the_garbage_collector_off_and_its_state_kept_after() -> None:
    """A collection lands where the allocation count says, in one job of every process: never in a timing."""
    import jax.numpy as jnp

    seen = []

    def f(x):
        seen.append(gc.isenabled())  # while tracing
        return x * 2

    assert gc.isenabled()
    mosaic.staged(f, [jnp.ones(3)])
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        mosaic.staged(lambda x: x + 1, [jnp.ones(3)])
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_kernel_bodies_are_the_same_on_every_generation_and_differ_with_the_shape() -> None:
    flash = contract.resolve("pallas_flash")
    other = BenchShape("other", dataclasses.replace(TINY.case, q_len=256, kv_len=256))
    v5e, v6e, longer = (
        aot.compile_one(flash, shape, topology, "fwd")
        for shape, topology in ((TINY, "v5e:1x1"), (TINY, "v6e:1x1"), (other, "v5e:1x1"))
    )
    digest = [mosaic.digest([mosaic.KernelBody.from_json(k) for k in r.kernels]) for r in (v5e, v6e, longer)]
    assert digest[0] == digest[1] != digest[2]
    bodies = [[mosaic.KernelBody.from_json(k) for k in r.kernels] for r in (v5e, longer)]
    shown = mosaic.diff(*bodies)
    assert shown.startswith("--- before") and "\n-" in shown and "\n+" in shown
    assert mosaic.diff(bodies[0], bodies[0]) == ""


def test_a_bad_repeat_count_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--repeat", "0", "--out", str(tmp_path)]) == 2
    assert "--repeat=0 must be at least 1" in capsys.readouterr().err


def test_unknown_shape_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--shape", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown shape" in capsys.readouterr().err


def test_benchmark_shapes_are_inside_the_kernel_contract() -> None:
    flash = contract.resolve("pallas_flash")
    assert all(not flash.violations(s.case) for s in SHAPES.values())
