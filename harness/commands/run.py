"""`run`: draw cases with Hypothesis and check kernels against the oracles."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness import console, contract, profiles
from harness.cli import EXIT_FAIL, EXIT_OK, UsageError
from harness.failures import write_failure
from harness.record import RunStore
from harness.search import search

NAME = "run"
HELP = "draw attention cases and check each kernel against the oracles and a float64 truth"
DEFAULT_OUT = "reports/store"
# The same-dtype JAX oracle is the ruler every subject is measured by, not a subject.
RULER = "jax_reference"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kernel",
        action="append",
        metavar="K",
        help="built-in kernel name, MODULE:ATTR drop-in, or KERNEL=MODULE:ATTR (repeatable; default pallas_flash)",
    )
    p.add_argument(
        "--oracle", action="append", metavar="O", help="oracle to check beside the kernel (default: all but the ruler)"
    )
    p.add_argument("--examples", type=int, metavar="N", help="cases per kernel (default: the profile's)")
    p.add_argument("--seed", type=int, metavar="S", help="Hypothesis seed (default: the profile's)")
    p.add_argument(
        "--profile",
        metavar="P",
        help=f"Hypothesis profile: {', '.join(profiles.PROFILES)} (default: ${profiles.PROFILE_ENV} or dev)",
    )
    p.add_argument(
        "--out", type=Path, default=Path(DEFAULT_OUT), metavar="DIR", help=f"results store (default {DEFAULT_OUT})"
    )
    p.add_argument("--no-grads", action="store_true", help="forward pass only")
    p.add_argument("--no-database", action="store_true", help="do not replay or save examples in DIR/.hypothesis")


def _resolve(specs: list[str], role: str) -> list[contract.Implementation]:
    out = []
    for spec in specs:
        try:
            impl = contract.resolve(spec)
        except contract.UnknownImplementation as e:
            raise UsageError(str(e)) from None
        if role == "oracle" and impl.role != "oracle":
            raise UsageError(f"--oracle {spec!r} is a {impl.role}; oracles: {contract.names('oracle')}")
        out.append(impl)
    return out


def main(args: argparse.Namespace) -> int:
    if args.examples is not None and args.examples < 1:
        raise UsageError(f"--examples={args.examples} must be at least 1")
    try:
        profile = profiles.profile_name(args.profile)
    except ValueError as e:
        raise UsageError(str(e)) from None
    kernels = _resolve(args.kernel or ["pallas_flash"], "kernel")
    oracles = _resolve(args.oracle or [n for n in contract.names("oracle") if n != RULER], "oracle")
    grads = not args.no_grads
    store = RunStore.create(
        args.out, meta={"command": sys.argv, "profile": profile, "kernels": [k.name for k in kernels]}
    )
    print(f"results -> {store.dir}")
    rows, failures, interrupted = [], [], False
    for kernel in kernels:
        n = args.examples or profiles.get(profile).max_examples
        print(
            f"== {kernel.name} on {kernel.backend()} vs {', '.join(o.name for o in oracles)}, "
            f"up to {n} cases, profile {profile}" + (", forward only" if not grads else "")
        )
        if kernel.backend() == "tpu_interpret":
            print("   no TPU attached: the kernel runs under the Pallas TPU interpreter on CPU")
        counter = {"i": 0}

        def on_result(result, n=n, counter=counter) -> None:
            counter["i"] += 1
            store.write_case(result)
            print(console.progress_line(counter["i"], n, result), flush=True)

        start = time.perf_counter()
        outcome = search(
            kernel,
            oracles,
            examples=args.examples,
            seed=args.seed,
            profile=profile,
            database=None if args.no_database else args.out / ".hypothesis",
            grads=grads,
            on_result=on_result,
        )
        elapsed = time.perf_counter() - start
        interrupted |= outcome.interrupted
        used = [
            c.max_abs / c.bound
            for r in outcome.results
            for s in r.subjects
            if s.implementation == kernel.name
            for c in s.comparisons
            if c.passed and c.bound > 0
        ]
        status = "interrupted" if outcome.interrupted else ("PASS" if outcome.passed else "FAIL")
        rows.append(
            {
                "kernel": kernel.name,
                "examples": len(outcome.results),
                "failed": sum(not r.passed for r in outcome.results),
                "worst": max(used, default=None),
                "seconds": elapsed,
                "status": status,
            }
        )
        if outcome.error:
            print(f"   {outcome.error}")
        if outcome.shrunk is not None:
            path = write_failure(
                args.out, outcome.shrunk, kernel=kernel.name, oracles=[o.name for o in oracles], grads=grads
            )
            store.write_case(outcome.shrunk, extra={"shrunk": True, "failure_file": str(path)})
            failures.append((kernel.name, outcome.shrunk, path))
        if outcome.interrupted:
            break
    print()
    print(console.summary_table(rows))
    for kernel_name, result, path in failures:
        print(f"\nFAIL {kernel_name}, shrunk to: {result.case}")
        for s in result.subjects:
            if not s.passed:
                print(console.comparison_table(s))
        print(f"  replay: {console.command_line('python', '-m', 'harness', 'repro', str(path))}")
    store.write_meta(
        {
            "command": sys.argv,
            "profile": profile,
            "kernels": [k.name for k in kernels],
            "status": "interrupted" if interrupted else "finished",
            "summary": rows,
        }
    )
    if interrupted:
        print("\nrun interrupted: every case finished so far is in", store.dir)
        return EXIT_FAIL
    return EXIT_OK if not failures and all(r["status"] == "PASS" for r in rows) else EXIT_FAIL
