"""Speed of every registered kernel and oracle at the fixed benchmark shapes, fwd and fwd+bwd.

Not part of `nox -s tests` (pytest's testpaths is tests/). Run through
`python -m harness bench` (or `nox -s bench`), which turns the timings into records.
ATTN_BENCH_SHAPES=name,name restricts the shapes.
"""

from __future__ import annotations

import os

import pytest

from harness.core import contract, shapes
from harness.runtime import compat
from harness.tpu import bench

SHAPE_NAMES = [n for n in os.environ.get("ATTN_BENCH_SHAPES", "").split(",") if n]
# ATTN_BENCH_KERNELS=spec,spec: only these (`bench --kernel`), drop-ins (KERNEL=MODULE:ATTR) included.
KERNELS = [n for n in os.environ.get("ATTN_BENCH_KERNELS", "").split(",") if n]


def _impl(name: str):  # noqa: ANN202 - a harness.core.contract.Implementation
    return contract.resolve(name) if KERNELS else contract.registry()[name]


def _params() -> list:
    out = []
    # Off a TPU the Pallas TPU kernels are timed under the TPU interpret mode (the default interpreter),
    # so that every cell's timing is of the same interpreter; a jax without it (before 0.7.0) times none.
    missing = compat.faithful_interpreter()
    for name in KERNELS or contract.names():
        impl = _impl(name)
        backend = bench.bench_backend(impl)
        if backend == "tpu_interpret" and missing is not None:
            out.append(pytest.param(name, "-", "-", id=f"{name}", marks=pytest.mark.skip(reason=missing)))
            continue
        for shape in shapes.get(SHAPE_NAMES or None):
            if impl.violations(shape.case) or not timed_on(backend, shape, explicit=bool(SHAPE_NAMES)):
                continue
            for pass_ in shapes.PASSES:
                if pass_ == "fwd_bwd" and not impl.capabilities.grads:
                    continue
                out.append(pytest.param(name, shape.name, pass_, id=f"{name}-{shape.name}-{pass_}"))
    return out


def timed_on(backend: str, shape: shapes.BenchShape, *, explicit: bool) -> bool:
    # A shape named in ATTN_BENCH_SHAPES is timed wherever it was asked for.
    return explicit or bench.timed_on(backend, shape.on_cpu)


@pytest.mark.parametrize(("impl_name", "shape_name", "pass_"), _params())
def test_speed(benchmark, impl_name: str, shape_name: str, pass_: str) -> None:
    impl = _impl(impl_name)
    shape = shapes.SHAPES[shape_name]
    backend = bench.bench_backend(impl)
    call = bench.timed_call(impl, shape.case, pass_)
    benchmark.group = f"{shape_name} {pass_} [{backend}]"
    benchmark.extra_info.update(
        {
            "implementation": impl_name,
            "backend": backend,
            "device": impl.device(),
            "timed": bench.timed_via(impl, shape.case),
            "shape": shape_name,
            "case": shape.case.to_json(),
            "pass": pass_,
        }
    )
    # pedantic: exactly ROUNDS timed calls after warm-up calls, the first of which traces and compiles.
    benchmark.pedantic(
        call, rounds=bench.ROUNDS.get(backend, 5), iterations=1, warmup_rounds=bench.warmup_rounds(backend)
    )
    benchmark.extra_info["peak_rss_bytes"] = bench.peak_rss_bytes()
    benchmark.extra_info["device_peak_bytes"] = compat.device_peak_bytes()
