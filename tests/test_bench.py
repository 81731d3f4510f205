"""Benchmark JSON to records: pytest-benchmark output becomes kind "bench" records."""

from __future__ import annotations

import dataclasses

from harness.store.files import record_name
from harness.tpu import bench

SYNTHETIC = {
    "datetime": "2026-01-01T00:00:00",
    "benchmarks": [
        {
            "name": "test_speed[pallas_flash-mha_f32_256-fwd]",
            "fullname": "benchmarks/test_speed.py::test_speed[pallas_flash-mha_f32_256-fwd]",
            "extra_info": {
                "implementation": "pallas_flash",
                "backend": "tpu_interpret",
                "timed": "jit",
                "shape": "mha_f32_256",
                "case": {"batch": 1},
                "pass": "fwd",
                "peak_rss_bytes": 123,
                "device_peak_bytes": None,
            },
            "stats": {
                "min": 0.1,
                "max": 0.3,
                "mean": 0.2,
                "median": 0.2,
                "stddev": 0.1,
                "rounds": 3,
                "data": [0.1, 0.2, 0.3],
            },
        },
        {"name": "test_other", "extra_info": {}, "stats": {"data": [1.0]}},  # not one of ours: skipped
    ],
}


def test_pytest_benchmark_json_becomes_bench_records() -> None:
    (typed,) = bench.records_from_pytest_benchmark(SYNTHETIC, run_id="r1")
    rec = typed.to_json()
    assert rec["kind"] == "bench" and rec["run_id"] == "r1"
    assert rec["samples"] == [0.1, 0.2, 0.3]
    assert (rec["implementation"], rec["backend"], rec["pass"]) == ("pallas_flash", "tpu_interpret", "fwd")
    assert rec["shape"] == {"name": "mha_f32_256", "case": {"batch": 1}}
    assert rec["peak_rss_bytes"] == 123 and rec["device_peak_bytes"] is None
    assert "never compare" in rec["note"]
    assert record_name(typed) == "bench--pallas_flash--mha_f32_256--fwd"


def test_interpreter_timings_are_never_comparable_with_native_ones() -> None:
    (rec,) = bench.records_from_pytest_benchmark(SYNTHETIC, run_id="r1")
    native = dataclasses.replace(rec, backend="tpu")
    assert bench.comparable(rec, dataclasses.replace(rec))
    assert not bench.comparable(rec, native)


def test_only_small_shapes_are_timed_without_an_accelerator() -> None:
    assert bench.timed_on("tpu_interpret", on_cpu=True)
    assert not bench.timed_on("tpu_interpret", on_cpu=False)
    assert not bench.timed_on("cpu", on_cpu=False)
    assert bench.timed_on("tpu", on_cpu=False)


def test_peak_rss_is_positive_bytes() -> None:
    assert bench.peak_rss_bytes() > 1 << 20
