"""`compile`: compile kernels ahead of time for TPU generations and record memory and cost."""

from __future__ import annotations

import argparse
import sys

from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.cli.commands._shared import add_kernel, add_out, create_store, kernel_specs
from harness.core import shapes
from harness.store.outline import Outline
from harness.store.schema import KernelStatus, RunStatus
from harness.tpu import compile as aot
from harness.tpu import mosaic

NAME = "compile"
HELP = "compile kernels for TPU generations without a TPU (libtpu) and record compiled memory and cost"


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
    add_kernel(p)
    p.add_argument(
        "--pass", dest="passes", action="append", choices=shapes.PASSES, help="fwd and/or fwd_bwd (default both)"
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=aot.REPEAT,
        metavar="N",
        help=f"fresh processes each job's trace, lowering and compile times are measured in; the median is "
        f"recorded (default {aot.REPEAT})",
    )
    add_out(p)


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
        f"{head} {_fmt_stages(r.times)}  arg {_fmt_bytes(m.get('argument'))} out {_fmt_bytes(m.get('output'))} "
        f"temp {_fmt_bytes(m.get('temp'))} code {_fmt_bytes(m.get('generated_code'))}  flops {flops} est {est}"
        f"  mosaic {_fmt_kernels(r)}{_fmt_outline(r)}"
    )


def _fmt_outline(r: aot.CompileResult) -> str:
    """The share of the program's bytes moved outside its kernels (harness.store.outline)."""
    if r.outline is None:
        return f"  outline unreadable ({(r.outline_error or '')[:60]})" if r.outline_error else ""
    o = Outline.from_json(r.outline)
    return f"  outside {o.outside_share:.0%}" + (" ANONYMOUS KERNEL" if any(k.anonymous for k in o.kernels) else "")


def _fmt_stages(times: dict[str, float | None]) -> str:
    """trace/lower/compile seconds (medians), "-" for a stage not timed apart."""
    return "/".join("-" if times.get(s) is None else f"{times[s]:.2f}" for s in mosaic.STAGES) + "s"


def _fmt_kernels(r: aot.CompileResult) -> str:
    """The kernel bodies' digest and total size; "varies" when fresh processes lowered different bodies."""
    if r.kernels_error:
        return f"unreadable ({r.kernels_error[:60]})"
    bodies = [mosaic.KernelBody.from_json(k) for k in r.kernels]
    if not bodies:
        return "-"
    text = f"{mosaic.digest(bodies)[:12]} {sum(b.size for b in bodies) / 1024:.1f}K x{len(bodies)}"
    return text + (" VARIES across processes" if r.deterministic is False else "")


def main(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise UsageError(f"--repeat={args.repeat} must be at least 1")
    chosen = shapes.get(args.shape)
    topologies = args.topology or list(aot.TOPOLOGIES)
    kernels = kernel_specs(args)
    jobs = aot.plan(kernels, chosen, topologies, args.passes or shapes.PASSES)
    # run.json records the APIs of the kernels compiled, as a run's does: not every registered one (importing each).
    meta = {"command": sys.argv, "mode": "compile", "topologies": topologies}
    store = create_store(args.out, meta, implementations=kernels)
    print(f"results -> {store.dir}")
    print(f"== ahead-of-time compile for {', '.join(topologies)} (compile-only devices: nothing runs)")

    def on_result(r: aot.CompileResult) -> None:
        if not r.ok:
            r.failure_file = str(aot.write_failure(args.out, r))
        aot.write_compile(store, r)
        print(line(r), flush=True)

    if args.repeat > 1:
        print(f"   each job in {args.repeat} fresh processes; stage times trace/lower/compile are medians")
    results = aot.compile_all(jobs, repeat=args.repeat, on_result=on_result)
    failed = [r for r in results if not r.ok]
    status = KernelStatus.PASS if results and not failed else KernelStatus.FAIL
    store.write_meta(
        {
            "command": sys.argv,
            "mode": "compile",
            "topologies": topologies,
            "status": RunStatus.FINISHED,
            "summary": [{"compiled": len(results), "failed": len(failed), "status": status}],
        }
    )
    print(f"\n{len(results) - len(failed)}/{len(results)} compiled")
    for r in failed:
        print(f"  failure: {r.failure_file}")
    if not results:
        print("nothing compiled: every shape is outside the kernel's contract", file=sys.stderr)
    return EXIT_OK if status == KernelStatus.PASS else EXIT_FAIL
