"""`profile`: write a jax.profiler trace of each kernel at the benchmark shapes, to open in Perfetto or TensorBoard."""

from __future__ import annotations

import argparse
import sys

from harness.cli import EXIT_FAIL, EXIT_OK
from harness.cli.commands._shared import add_kernel, add_out, create_store, kernel_specs
from harness.core import contract, shapes
from harness.store.files import safe_name
from harness.store.schema import KernelStatus, RunStatus
from harness.tpu import bench
from harness.tpu import profile as prof

NAME = "profile"
HELP = "write a jax.profiler trace of each kernel at the benchmark shapes, the harness's phases as named scopes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--shape",
        action="append",
        metavar="S",
        help=f"benchmark shape (repeatable; default: those timed here, of {', '.join(shapes.SHAPES)})",
    )
    add_kernel(p)
    p.add_argument(
        "--pass", dest="passes", action="append", choices=shapes.PASSES, help="fwd and/or fwd_bwd (default both)"
    )
    add_out(p)


def line(r: prof.ProfileResult) -> str:
    head = f"{'ok  ' if r.ok else 'FAIL'} {r.implementation:<12} {r.shape:<22} {r.pass_:<7} {r.seconds:6.1f}s"
    if not r.ok:
        return f"{head}  {r.error}"
    json_trace = next((f for f in r.files if f.endswith(".trace.json.gz")), None)
    return f"{head}  {json_trace or r.trace_dir}"


def main(args: argparse.Namespace) -> int:
    chosen = shapes.get(args.shape)
    impls = [contract.resolve(spec) for spec in kernel_specs(args)]
    store = create_store(args.out, {"command": sys.argv, "mode": "profile"})
    traces = store.root / "traces" / store.run_id
    print(f"traces -> {traces}")
    results = []
    for impl in impls:
        backend = bench.bench_backend(impl)
        if backend == "tpu_interpret":
            print(f"{impl.name}: no TPU here: traced under the Pallas TPU interpreter on CPU; the trace shows")
            print("  where the harness and the interpreter spend their time, not the kernel's own")
        for shape in chosen:
            # Without an accelerator only the shapes that bench times there (the interpreter takes
            # seconds per grid step at long sequences), unless a shape is asked for by name.
            if impl.violations(shape.case) or not (args.shape or bench.timed_on(backend, shape.on_cpu)):
                continue
            for pass_ in args.passes or shapes.PASSES:
                if pass_ == "fwd_bwd" and not impl.capabilities.grads:
                    continue
                trace_dir = traces / safe_name(f"{impl.name}--{shape.name}--{pass_}")
                r = prof.profile_one(impl, shape, pass_, trace_dir, backend=backend)
                results.append(r)
                print(line(r), flush=True)
    failed = [r for r in results if not r.ok]
    status = KernelStatus.PASS if results and not failed else KernelStatus.FAIL
    store.write_meta(
        {
            "command": sys.argv,
            "mode": "profile",
            "status": RunStatus.FINISHED,
            "traces": [r.to_json() | {"traceback": None} for r in results],
            "summary": [{"traced": len(results), "failed": len(failed), "status": status}],
        }
    )
    print(f"\n{len(results) - len(failed)}/{len(results)} traced; open one: upload its .trace.json.gz at")
    print(f"https://ui.perfetto.dev, or `tensorboard --logdir {traces}/<kernel>--<shape>--<pass>` (Profile tab)")
    if not results:
        print("nothing traced: every shape is outside the kernel's contract", file=sys.stderr)
    return EXIT_OK if status == KernelStatus.PASS else EXIT_FAIL
