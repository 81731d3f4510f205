"""`bench`: time kernels and oracles at the fixed shapes (pytest-benchmark) and record the samples."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.cli.commands._shared import add_out, create_store
from harness.core import contract, shapes
from harness.runtime import compat
from harness.store.schema import KernelStatus, RunStatus
from harness.tpu import bench

NAME = "bench"
HELP = "time every kernel and oracle at the benchmark shapes, fwd and fwd+bwd, and record samples and memory"
BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--shape", action="append", metavar="S", help=f"benchmark shape (repeatable; one of {list(shapes.SHAPES)})"
    )
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest -k expression over test ids (impl-shape-pass)")
    p.add_argument(
        "--kernel",
        action="append",
        default=[],
        metavar="K",
        help="only these implementations (repeatable): a name, MODULE:ATTR or KERNEL=MODULE:ATTR (a fork)",
    )
    add_out(p)


def main(args: argparse.Namespace) -> int:
    try:
        import pytest
        import pytest_benchmark  # noqa: F401 - the benchmarks' fixture
    except ImportError as e:
        raise UsageError(f"bench needs pytest and pytest-benchmark ({e}): pip install -e '.[test]'") from None

    shapes.get(args.shape)  # an unknown name is bad input (ShapeError), said before anything runs
    if not (BENCHMARKS / "test_speed.py").is_file():
        raise UsageError(f"benchmarks not found at {BENCHMARKS}; run from a source checkout (pip install -e .)")
    if args.shape:
        os.environ["ATTN_BENCH_SHAPES"] = ",".join(args.shape)
    if args.kernel:
        for spec in args.kernel:
            contract.resolve(spec)  # an unknown kernel is bad input, said before anything runs
        os.environ["ATTN_BENCH_KERNELS"] = ",".join(args.kernel)
    store = create_store(args.out, {"command": sys.argv, "mode": "bench"})
    print(f"results -> {store.dir}")
    if compat.jax_platform() == "cpu":
        print("no accelerator: the Pallas kernel is timed under the TPU interpreter (backend tpu_interpret);")
        print("those timings measure the interpreter, not the kernel, and are never compared with native ones")
    with tempfile.TemporaryDirectory() as tmp:
        out_json = Path(tmp) / "bench.json"
        argv = [
            str(BENCHMARKS),
            "-p",
            "no:cacheprovider",
            f"--rootdir={BENCHMARKS.parent}",
            f"--benchmark-json={out_json}",
            "--benchmark-save-data",
            "--benchmark-columns=min,median,max,rounds",
            # Python's garbage collector off while timing, as timeit does (and mosaic.staged for the
            # compile stages): a collection lands where the allocation count says, the same timed
            # call in every process of one library version, which the speed rule takes for a change.
            "--benchmark-disable-gc",
            # hypothesis is imported before pytest starts here; its plugin cannot be rewritten.
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
        ] + (["-k", args.keyword] if args.keyword else [])
        # A worker name inherited from a parent pytest-xdist run (this command started by a test) is not this
        # session's: pytest-benchmark would take it for one and disable every benchmark.
        os.environ.pop("PYTEST_XDIST_WORKER", None)
        code = pytest.main(argv)
        data = json.loads(out_json.read_text()) if out_json.exists() else {"benchmarks": []}
    records = bench.records_from_pytest_benchmark(data, run_id=store.run_id)
    for rec in records:
        store.write(rec)
    status = KernelStatus.PASS if code == 0 and records else KernelStatus.FAIL
    store.write_meta(
        {
            "command": sys.argv,
            "mode": "bench",
            "status": RunStatus.FINISHED,
            "summary": [{"benchmarks": len(records), "pytest_exit": int(code), "status": status}],
        }
    )
    print(f"{len(records)} bench records -> {store.dir}")
    return EXIT_OK if status == KernelStatus.PASS else EXIT_FAIL
