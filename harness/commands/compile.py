"""`compile`: compile kernels ahead of time for TPU generations and record memory and cost."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import compile as aot
from harness import contract, shapes
from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.record import RunStore, write_compile

NAME = "compile"
HELP = "compile kernels for TPU generations without a TPU (libtpu) and record compiled memory and cost"
DEFAULT_OUT = "reports/store"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--topology",
        action="append",
        metavar="T",
        help=f"compile-only TPU topology (repeatable; default: {', '.join(aot.TOPOLOGIES)})",
    )
    p.add_argument(
        "--shape",
        action="append",
        metavar="S",
        help=f"benchmark shape (repeatable; default all: {', '.join(shapes.SHAPES)})",
    )
    p.add_argument(
        "--kernel", action="append", metavar="K", help="kernel name or MODULE:ATTR drop-in (default pallas_flash)"
    )
    p.add_argument(
        "--pass", dest="passes", action="append", choices=shapes.PASSES, help="fwd and/or fwd_bwd (default both)"
    )
    p.add_argument(
        "--out", type=Path, default=Path(DEFAULT_OUT), metavar="DIR", help=f"results store (default {DEFAULT_OUT})"
    )


def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f}M"


def line(r: aot.CompileResult) -> str:
    """One progress line: verdict, topology, shape, pass, memory and the compiler's estimates."""
    head = f"{'ok  ' if r.ok else 'FAIL'} {r.implementation:<12} {r.topology:<10} {r.shape:<22} {r.pass_:<7}"
    if not r.ok:
        return f"{head} {r.seconds:5.1f}s  {r.error}"
    m, c = r.memory, r.cost
    flops = "-" if c.get("flops") is None else f"{c['flops']:.3g}"
    est = "-" if c.get("optimal_seconds") is None else f"{c['optimal_seconds'] * 1e6:.1f}us"
    return (
        f"{head} {r.seconds:5.1f}s  arg {_fmt_bytes(m.get('argument'))} out {_fmt_bytes(m.get('output'))} "
        f"temp {_fmt_bytes(m.get('temp'))} code {_fmt_bytes(m.get('generated_code'))}  flops {flops} est {est}"
    )


def main(args: argparse.Namespace) -> int:
    try:
        chosen = shapes.get(args.shape)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    specs = args.kernel or ["pallas_flash"]
    topologies = args.topology or list(aot.TOPOLOGIES)
    try:
        jobs = aot.plan(specs, chosen, topologies, args.passes or shapes.PASSES)
    except contract.UnknownImplementation as e:
        raise UsageError(str(e)) from None
    store = RunStore.create(args.out, meta={"command": sys.argv, "mode": "compile", "topologies": topologies})
    print(f"results -> {store.dir}")
    print(f"== ahead-of-time compile for {', '.join(topologies)} (compile-only devices: nothing runs)")

    def on_result(r: aot.CompileResult) -> None:
        if not r.ok:
            r.failure_file = str(aot.write_failure(args.out, r))
        write_compile(store, r)
        print(line(r), flush=True)

    results = aot.compile_all(jobs, on_result=on_result)
    failed = [r for r in results if not r.ok]
    status = "PASS" if results and not failed else "FAIL"
    store.write_meta(
        {
            "command": sys.argv,
            "mode": "compile",
            "topologies": topologies,
            "status": "finished",
            "summary": [{"compiled": len(results), "failed": len(failed), "status": status}],
        }
    )
    print(f"\n{len(results) - len(failed)}/{len(results)} compiled")
    for r in failed:
        print(f"  failure: {r.failure_file}")
    if not results:
        print("nothing compiled: every shape is outside the kernel's contract", file=sys.stderr)
    return EXIT_OK if status == "PASS" else EXIT_FAIL
