"""`leak`: call each kernel many times at a fixed shape; exit 1 if its memory in use grows per call."""

from __future__ import annotations

import argparse
import sys

from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.cli.commands._shared import add_kernel, add_out, create_store, interrupt_signals, kernel_specs, resolve
from harness.core import contract
from harness.running import leak
from harness.store.schema import RunStatus

NAME = "leak"
HELP = "call each kernel many times (forward, forward+backward; eager and jitted) and fail if memory grows per call"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_kernel(p)
    p.add_argument(
        "--calls",
        type=int,
        default=leak.DEFAULT_CALLS,
        metavar="N",
        help=f"sampled calls per variant, after {leak.WARMUP_CALLS} warm-up calls (default {leak.DEFAULT_CALLS})",
    )
    p.add_argument(
        "--variant",
        action="append",
        choices=[v.name for v in leak.VARIANTS],
        help="only these ways of calling (repeatable; default all)",
    )
    add_out(p)


def _line(r: leak.LeakResult) -> str:
    if r.error:
        return f"  {r.variant.name:<12} ERROR  {r.error}"
    series = ", ".join(f"{g.series} {g.slope:+.3g}/call" for g in r.growth)
    return f"  {r.variant.name:<12} {'ok   ' if r.passed else 'LEAKS'}  {series}  ({r.seconds:.1f} s)"


def main(args: argparse.Namespace) -> int:
    if args.calls < 3:
        raise UsageError(f"--calls={args.calls} is too few to fit a growth per call; give at least 3")
    kernels: list[contract.Implementation] = resolve(kernel_specs(args), "kernel")
    variants = [v for v in leak.VARIANTS if not args.variant or v.name in args.variant]
    meta = {"command": sys.argv, "mode": "leak", "kernels": [k.name for k in kernels], "calls": args.calls}
    store = create_store(args.out, meta)
    print(f"results -> {store.dir}")
    print(f"each variant: {leak.WARMUP_CALLS} warm-up calls, then {args.calls} sampled, at {leak.LEAK_CASE}")
    results: list[leak.LeakResult] = []
    status = RunStatus.FINISHED
    try:
        with interrupt_signals():
            for kernel in kernels:
                print(f"== {kernel.name} on {kernel.backend()}")
                for variant in variants:
                    r = leak.measure(kernel, variant, calls=args.calls)
                    if r is None:
                        print(f"  {variant.name:<12} n/a    (no jax_fn to jit)")
                        continue
                    store.write(leak.leak_record(r, run_id=store.run_id))
                    results.append(r)
                    print(_line(r), flush=True)
    except KeyboardInterrupt:
        status = RunStatus.INTERRUPTED
    failed = [r for r in results if not r.passed]
    summary = [{"implementation": r.implementation, "variant": r.variant.name, "passed": r.passed} for r in results]
    store.write_meta({**meta, "status": status, "summary": summary})
    for r in failed:
        why = r.error or "; ".join(str(g) for g in r.growing)
        print(f"\nLEAK {r.implementation} {r.variant.name}: {why}")
    if status == RunStatus.INTERRUPTED:
        print("\nleak check interrupted: every variant finished so far is in", store.dir)
        return EXIT_FAIL
    if not failed:
        print(f"\nno growth: {len(results)} variant(s) flat within the limits of harness.running.leak.GROWTH_LIMITS")
    return EXIT_FAIL if failed else EXIT_OK
