"""`run`: draw cases with Hypothesis and check kernels against the oracles."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from harness.cli import EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_OK, UsageError, console
from harness.cli.commands._shared import (
    SIGNALLED,
    add_kernel,
    add_out,
    create_store,
    interrupt_signals,
    kernel_specs,
    resolve,
)
from harness.core import compat, contract, features, placement, profiles, strips
from harness.running import runner, shards, signatures, worker
from harness.running.failures import divergence_line, write_divergence, write_failure
from harness.running.search import search
from harness.store.derive import repro_command
from harness.store.files import RunStore, atomic_write_json
from harness.store.schema import KernelStatus, RunStatus
from harness.tpu import crosscheck

NAME = "run"
HELP = "draw attention cases and check each kernel against the oracles and a float64 truth"
# The same-dtype JAX oracle is the ruler every subject is measured by, not a subject.
RULER = "jax_reference"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_kernel(p)
    p.add_argument(
        "--oracle", action="append", metavar="O", help="oracle to check beside the kernel (default: all but the ruler)"
    )
    p.add_argument("--examples", type=int, metavar="N", help="cases per kernel (default: the profile's)")
    p.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="Hypothesis seed (default: the profile's); a seeded run neither reads nor saves the example database",
    )
    p.add_argument(
        "--profile",
        metavar="P",
        help=f"Hypothesis profile: {', '.join(profiles.PROFILES)} (default: ${profiles.PROFILE_ENV} or dev)",
    )
    add_out(p)
    p.add_argument("--no-grads", action="store_true", help="forward pass only")
    p.add_argument("--no-database", action="store_true", help="do not replay or save examples in DIR/.hypothesis")
    p.add_argument(
        "--case-timeout",
        type=float,
        metavar="S",
        help="per-case time limit of each kernel call: kernels run in a worker process, killed on overrun "
        "(a hang, crash or exit fails that case, and the run goes on with a fresh worker); "
        f"default ${worker.TIME_LIMIT_ENV}, else {worker.DEFAULT_TIME_LIMIT_S:g}",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="print each case whole (block sizes and all) on its line"
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run the kernels in this process, with no time limit (for a debugger); "
        "a kernel that crashes or exits then ends the run",
    )
    p.add_argument(
        "--max-shrinks", type=int, metavar="N", help="cases run while shrinking each failure (default: the profile's)"
    )
    p.add_argument(
        "--first-failure",
        action="store_true",
        help="stop each kernel's search at its first failure (default: search on, and report every distinct "
        "failure, each shrunk, with its own failure file)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help=f"worker processes, each checking one shard of the run into the same store; the summary merges "
        f"them (default ${shards.JOBS_ENV}, else the number of cores)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="check only shard I of N (0 <= I < N): the cases whose program's id is I modulo N, its share of "
        "--examples; "
        "shards of one run are disjoint and the same every time (for CI jobs on several machines)",
    )
    p.add_argument(
        "--no-smoke",
        action="store_true",
        help="skip the smoke cases (each declared mask component, tiling class and dtype at the smallest size) "
        "that a run checks before drawing cases",
    )
    p.add_argument(
        "--no-pool",
        action="store_true",
        help="draw every case whole instead of mostly from the run's pool of compiled programs "
        '(README "Where a case\'s time goes"): every case compiles anew, several times slower',
    )
    p.add_argument(
        "--cross-interpret",
        action="store_true",
        help="on a TPU host: also run each Pallas TPU kernel under the interpreter as a further subject "
        "('<kernel>@interpret'), judged against the same truth, so interpreter and chip are compared",
    )
    g = p.add_argument_group("interpreter checks (Pallas TPU interpreter only)")
    g.add_argument(
        "--interpreter",
        choices=runner.INTERPRETER_POLICIES,
        help="which interpreter runs a Pallas TPU kernel off a TPU: fast (the default: the HLO interpreter for "
        "drawn cases; the faithful TPU interpret mode for smoke cases, a share of drawn cases, and the replay of "
        "every failure before it is reported), faithful (every case), or both (every case on each, compared); "
        "with --detect-races or --grid-order-seed the default is faithful",
    )
    g.add_argument("--detect-races", action="store_true", help="run the race detector; a race fails the case")
    g.add_argument(
        "--uninitialized-memory",
        choices=compat.UNINITIALIZED_MEMORY,
        default="nan",
        help="fill of buffers read before written (default nan: such a read shows as a non-finite output)",
    )
    g.add_argument(
        "--grid-order-seed",
        type=int,
        metavar="N",
        help="randomise 'parallel' grid order with seed N, rerun each kernel case with seed N+1, "
        "and fail a case whose two results differ at all",
    )


def _create_dir(out: Path) -> None:
    """The store directory for workers to share; an --out that cannot be one is bad input (exit 2)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out={str(out)!r} is a file; give a directory (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = e.strerror or e
        raise UsageError(f"--out={str(out)!r} cannot be written ({why}); give a writable directory") from None


def _worker_argv(args: argparse.Namespace) -> list[str]:
    """This run's options as a command line (without --jobs and --shard), for its workers."""
    argv = ["run", "--out", str(args.out)]
    for kernel in args.kernel or []:
        argv += ["--kernel", kernel]
    for oracle in args.oracle or []:
        argv += ["--oracle", oracle]
    valued = {
        "--examples": args.examples,
        "--seed": args.seed,
        "--profile": args.profile,
        "--case-timeout": args.case_timeout,
        "--max-shrinks": args.max_shrinks,
        "--uninitialized-memory": args.uninitialized_memory,
        "--grid-order-seed": args.grid_order_seed,
        "--interpreter": args.interpreter,
    }
    argv += [str(x) for option, value in valued.items() if value is not None for x in (option, value)]
    flags = {
        "--no-grads": args.no_grads,
        "--no-database": args.no_database,
        "--cross-interpret": args.cross_interpret,
        "--detect-races": args.detect_races,
        "--no-smoke": args.no_smoke,
        "--no-pool": args.no_pool,
        "--in-process": args.in_process,
        "--verbose": args.verbose,
        "--first-failure": args.first_failure,
    }
    return argv + [flag for flag, on in flags.items() if on]


def _run_jobs(args: argparse.Namespace, jobs: int) -> int:
    """`jobs` worker processes, shard i of `jobs` each, into one store; then the merged summary."""
    print(f"{jobs} worker processes, one shard each, into {args.out}", flush=True)
    done = shards.run_workers(_worker_argv(args), jobs)
    token = done.token
    _mark_unfinished(args.out, token, list(done.codes), interrupted=done.interrupted)
    runs = shards.worker_runs(args.out, token)
    rows = shards.merge_rows(runs)
    print(f"\n== merged summary of {len(runs)} of {jobs} shards: {', '.join(m['run_id'] for m in runs)}")
    print(console.summary_table(rows))
    ids = {m["run_id"] for m in runs}
    for kernel in resolve(kernel_specs(args), "kernel"):
        cases = shards.worker_cases(args.out, ids, kernel.name)
        print(f"{kernel.name}: {features.coverage(kernel, cases).line()}")
    for i, code in enumerate(done.codes):
        if code < 0:  # killed before it could say why: its run.json says "failed" (or "interrupted")
            print(f"shard {i}/{jobs}: the worker process {worker.how_it_died(code)}")
    if done.interrupted:
        print("\nrun interrupted: every case finished so far is in", args.out)
    return done.code


def _mark_unfinished(store: Path, token: str, codes: list[int], *, interrupted: bool) -> None:
    """A worker's run.json still "running" after it ended (killed before it could write more)
    ends "interrupted" after a stop, else "failed" with how the worker ended."""
    for path in store.glob("records/*/run.json"):
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if meta.get("jobs_parent") != token or meta.get("status") != RunStatus.RUNNING:
            continue
        index = shards.Shard.parse(meta.get("shard", "0/1")).index
        code = codes[index] if index < len(codes) else None
        if interrupted:
            meta["status"] = RunStatus.INTERRUPTED
        else:
            meta |= {"status": RunStatus.FAILED, "error": f"the worker process ended with exit status {code}"}
        atomic_write_json(path, meta)


def main(args: argparse.Namespace) -> int:
    if args.examples is not None and args.examples < 1:
        raise UsageError(f"--examples={args.examples} must be at least 1")
    if args.case_timeout is not None and not (math.isfinite(args.case_timeout) and args.case_timeout > 0):
        raise UsageError(f"--case-timeout={args.case_timeout} must be a positive number of seconds")
    if args.case_timeout is not None and args.in_process:
        raise UsageError("--in-process runs kernels with no time limit; drop --case-timeout")
    if args.max_shrinks is not None and args.max_shrinks < 0:
        raise UsageError(f"--max-shrinks={args.max_shrinks} must be at least 0")
    if args.grid_order_seed is not None and args.grid_order_seed < 0:
        raise UsageError(f"--grid-order-seed={args.grid_order_seed} must be non-negative")
    options = _interpret_options(args)
    try:
        profile = profiles.profile_name(args.profile)
        time_limit = _time_limit(args)
        jobs = shards.default_jobs() if args.jobs is None else args.jobs
        shard = shards.Shard.parse(args.shard) if args.shard is not None else shards.Shard(0, 1)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if jobs < 1:
        raise UsageError(f"--jobs={jobs} must be at least 1")
    if jobs > 1 and args.shard is not None:
        raise UsageError(f"--shard={args.shard} checks one shard in this process; drop --jobs={jobs} (or use --jobs 1)")
    if jobs > 1:
        resolve(kernel_specs(args), "kernel")  # bad input is said once, before any worker starts
        _create_dir(args.out)
        return _run_jobs(args, jobs)
    kernels = resolve(kernel_specs(args), "kernel")
    if args.cross_interpret and not crosscheck.twins(kernels):
        raise UsageError("--cross-interpret needs a kernel running natively on a TPU; here none does")
    if args.cross_interpret and args.case_timeout is not None:
        raise UsageError("--cross-interpret runs its interpreted twins in-process; drop --case-timeout")
    if os.environ.get(shards.PARENT_PID_ENV):
        # A worker of `run --jobs`: stop (as interrupted) when the parent dies, never run on as an orphan.
        worker.die_with_parent(signal.SIGTERM, int(os.environ[shards.PARENT_PID_ENV]))
    oracles = resolve(args.oracle or [n for n in contract.names("oracle") if n != RULER], "oracle")
    grads = not args.no_grads
    meta = {"command": sys.argv, "profile": profile, "kernels": [k.name for k in kernels]}
    if shard.count > 1 or args.shard is not None:
        meta["shard"] = str(shard)
    if os.environ.get(shards.PARENT_ENV):
        meta["jobs_parent"] = os.environ[shards.PARENT_ENV]
    meta |= {"interpret": options.to_json(), "case_timeout": time_limit}
    # The report renders conventions from records, never from live objects.
    meta["conventions"] = {i.name: i.conventions.to_json() for i in (*kernels, *oracles)}
    # Where each side computed: kernels on the accelerator, the references on the CPU (harness.core.placement).
    meta["placement"] = {"references": placement.describe(placement.reference_device())}
    meta["placement"] |= {i.name: i.device() for i in (*kernels, *oracles)}
    store = create_store(args.out, meta, [i.name for i in (*kernels, *oracles)])
    print(f"results -> {store.dir}")
    print(f"references (float64 truth, ruler, oracles) on {meta['placement']['references']}")
    rows: list[dict] = []
    failures: list = []
    interrupted = False
    try:
        with interrupt_signals():
            interrupted = _run_kernels(
                args, kernels, oracles, profile, grads, options, store, rows, failures, shard, time_limit
            )
    except KeyboardInterrupt:
        interrupted = True
    except SystemExit as e:
        # Only kernel code run in this process (--in-process) exits mid-run: never a pass (exit 3).
        error = f"SystemExit({e.code!r}) inside the run: a kernel run with --in-process exited"
        with contextlib.suppress(OSError):
            store.write_meta({**meta, "status": RunStatus.FAILED, "error": error, "summary": rows})
        raise RuntimeError(f"{error}; run it without --in-process to see that kernel's failure recorded") from None
    except Exception as e:
        if not SIGNALLED:
            _record_failure(store, meta, rows, e)
            raise
        # A stop that landed inside a library which turned its KeyboardInterrupt into an error of
        # its own (Hypothesis's wrapped_test asserts on its state): the run was interrupted, not broken.
        interrupted = True
    except BaseException as e:
        _record_failure(store, meta, rows, e)
        raise
    finally:
        worker.shutdown()
    print()
    print(console.summary_table(rows))
    for kernel_name, result, path in failures:
        print(f"\nFAIL {kernel_name}, shrunk to: {result.case}")
        for s in result.subjects:
            if not s.passed:
                print(console.comparison_table(s) + strips.appendix(s.located))
        print(f"  replay: {repro_command(str(path))}")
    for r in (r for r in rows if r.get("divergence") and r["failed"]):
        print(
            f"\nINTERPRETER DIVERGENCE: {r['kernel']}: the two interpreters disagreed on {r['failed']} of "
            f"{r['examples']} cases both ran; not counted as kernel failures (the faithful interpreter's verdict "
            f"is the kernel's). Replayable files under {args.out / 'divergences'}"
        )
    findings = [r for r in rows if r.get("oracle") and r["failed"]]
    for r in findings:
        print(
            f"\nORACLE FINDING: {r['kernel']} was outside its own tolerance on {r['failed']} of {r['examples']} "
            "cases; not counted against any kernel (the kernels are judged on the float64 truth). "
            f"Its records are in {store.dir}"
        )
    cannot = {r["kernel"]: r["error"] for r in rows if r["status"] == KernelStatus.CANNOT_RUN}
    status = RunStatus.INTERRUPTED if interrupted else (RunStatus.CANNOT_RUN if cannot else RunStatus.FINISHED)
    store.write_meta({**meta, "status": status, "summary": rows, "cannot_run": cannot})
    if interrupted:
        print("\nrun interrupted: every case finished so far is in", store.dir)
        return EXIT_FAIL
    # Oracle rows never fail the run: their findings are reported apart (_oracle_rows).
    kernel_rows = [r for r in rows if not r.get("oracle") and not r.get("divergence")]
    if failures or any(r["status"] not in (KernelStatus.PASS, KernelStatus.CANNOT_RUN) for r in kernel_rows):
        return EXIT_FAIL
    return EXIT_CANNOT_RUN if cannot else EXIT_OK


def _interpret_options(args: argparse.Namespace) -> compat.InterpretOptions:
    """The interpreter options, args.interpreter defaulted: fast, or faithful where a faithful-only check is asked."""
    checks = args.detect_races or args.grid_order_seed is not None
    if args.interpreter is None:
        args.interpreter = "faithful" if checks else "fast"
    if checks and args.interpreter != "faithful":
        raise UsageError(f"--detect-races and --grid-order-seed need --interpreter faithful, not {args.interpreter}")
    return compat.InterpretOptions(
        detect_races=args.detect_races,
        uninitialized_memory=args.uninitialized_memory,
        random_seed=args.grid_order_seed,
        check_grid_order=args.grid_order_seed is not None,
        interpreter="faithful" if args.interpreter == "faithful" else "fast",
    )


def _divergence_row(kernel: str, results: list) -> dict | None:
    """The summary row of a kernel's interpreter divergences (a finding about an interpreter, reported
    apart like an oracle's: never a kernel failure), over the cases both interpreters ran; None where none did."""
    both = [s for r in results for s in r.subjects if s.implementation == kernel and s.shadow is not None]
    if not both:
        return None
    found = [s for s in both if s.divergence]
    return {
        "kernel": f"{kernel} (fast vs faithful)",
        "divergence": True,
        "examples": len(both),
        "failed": len(found),
        "worst": None,
        "seconds": sum(s.shadow.seconds for s in both),
        "status": KernelStatus.INTERPRETER_DIVERGENCE if found else KernelStatus.PASS,
    }


def _record_failure(store: RunStore, meta: dict, rows: list[dict], e: BaseException) -> None:
    """run.json says "failed" with the error (exit 3 in harness.cli): it must not stay "running"."""
    with contextlib.suppress(OSError):
        store.write_meta(
            {**meta, "status": RunStatus.FAILED, "error": f"{type(e).__name__}: {e}"[:500], "summary": rows}
        )


def _time_limit(args: argparse.Namespace) -> float | None:
    """The per-case time limit of kernel calls: --case-timeout, else the default; None in-process.

    --cross-interpret runs its interpreted twins in this process, so it keeps the kernels here too.
    """
    if args.case_timeout is not None:
        return args.case_timeout
    if args.in_process or args.cross_interpret:
        return None
    return worker.default_time_limit()


def _oracle_rows(results: list, oracles: list[contract.Implementation]) -> list[dict]:
    """One summary row per oracle: an oracle outside its own tolerance is a finding about the
    oracle, shown apart with status ORACLE FINDING; it never fails a kernel or the run."""
    rows = []
    for oracle in oracles:
        mine = [s for r in results for s in r.subjects if s.implementation == oracle.name]
        used = [c.max_abs / c.bound for s in mine for c in s.comparisons if c.passed and c.bound > 0]
        found = [s for s in mine if not s.passed]
        rows.append(
            {
                "kernel": f"{oracle.name} (oracle)",
                "oracle": True,
                "examples": len(mine),
                "failed": len(found),
                "worst": max(used, default=None),
                "seconds": sum(s.seconds for s in mine),
                "status": KernelStatus.ORACLE_FINDING if found else KernelStatus.PASS,
            }
        )
    return rows


def _cannot_run_row(kernel: str, reason: str) -> dict:
    row = {
        "kernel": kernel,
        "examples": 0,
        "failed": 0,
        "worst": None,
        "seconds": 0.0,
        "status": KernelStatus.CANNOT_RUN,
    }
    return row | {"error": reason}


def _run_kernels(
    args: argparse.Namespace,
    kernels: list[contract.Implementation],
    oracles: list[contract.Implementation],
    profile: str,
    grads: bool,
    options: compat.InterpretOptions,
    store: RunStore,
    rows: list[dict],
    failures: list,
    shard: shards.Shard,
    time_limit: float | None,
) -> bool:
    """Search each kernel in turn, appending summary rows and failures; True if interrupted."""
    all_grads = grads
    for kernel in kernels:
        # A forward-only kernel (no VJP: the decode kernels) is checked, and replayed, forward only.
        grads = all_grads and kernel.capabilities.grads
        n = shard.examples(args.examples or profiles.get(profile).max_examples)
        against = ", ".join(o.name for o in oracles) or "the float64 truth only"
        print(
            f"== {kernel.name} on {kernel.backend()} ({kernel.device()}) vs {against}, "
            f"up to {n} cases, profile {profile}" + (", forward only" if not grads else "")
        )
        if kernel.backend() == "tpu_interpret":
            runs_on = ", ".join(kernel.interpreters()) or "none"
            print(
                f"   no TPU attached: the kernel runs under a Pallas TPU interpreter on CPU (--interpreter "
                f"{args.interpreter}; it runs under: {runs_on})"
            )
        reason = kernel.cannot_run()
        if reason is not None:
            # A result, not a skip: recorded in run.json with the interpreter's own error.
            print(f"   {KernelStatus.CANNOT_RUN}: {reason}")
            rows.append(_cannot_run_row(kernel.name, reason))
            continue
        counter = {"i": 0}

        def on_result(result, n=n, counter=counter, kernel=kernel, grads=grads) -> None:
            counter["i"] += 1
            for subject in result.divergences:
                path = write_divergence(
                    args.out,
                    result,
                    subject,
                    kernel=kernel,
                    oracles=oracles,
                    grads=grads,
                    interpret=options,
                    time_limit=time_limit,
                )
                print(f"   interpreter divergence: {divergence_line(subject)}\n   replay: {repro_command(str(path))}")
            store.write_case(result)
            print(console.progress_line(counter["i"], n, result, verbose=args.verbose), flush=True)
            if SIGNALLED:
                raise KeyboardInterrupt(f"signal {SIGNALLED[0]}")

        start = time.perf_counter()
        outcome = search(
            kernel,
            [*oracles, *(crosscheck.twins([kernel]) if args.cross_interpret else [])],
            examples=n,
            seed=args.seed,
            profile=profile,
            database=None if args.no_database else args.out / ".hypothesis",
            grads=grads,
            time_limit=time_limit,
            interpret=options,
            interpreters=args.interpreter,
            shrink_runs=args.max_shrinks,
            smoke=not args.no_smoke,
            reuse=not args.no_pool,
            owns=shard.owns if shard.count > 1 else None,
            first_failure=args.first_failure,
            on_result=on_result,
        )
        elapsed = time.perf_counter() - start
        used = [
            c.max_abs / c.bound
            for r in outcome.results
            for s in r.subjects
            if s.implementation == kernel.name
            for c in s.comparisons
            if c.passed and c.bound > 0
        ]
        status = (
            KernelStatus.INTERRUPTED
            if outcome.interrupted
            else (KernelStatus.PASS if outcome.passed else KernelStatus.FAIL)
        )
        covered = features.coverage(kernel, [r.case for r in outcome.results])
        print(f"   {covered.line()}")
        rows.append(
            {
                "kernel": kernel.name,
                "examples": len(outcome.results),
                "failed": sum(not r.passed for r in outcome.results),
                "worst": max(used, default=None),
                "seconds": elapsed,
                "status": status,
                "pairwise": covered.to_json(),
            }
        )
        divergence_row = _divergence_row(kernel.name, outcome.results)
        rows.extend([divergence_row] if divergence_row else [])
        rows.extend(_oracle_rows(outcome.results, oracles))
        if outcome.error:
            print(f"   {outcome.error}")
        # Every distinct failure of the search, each with its own failure file and replay line.
        for n, (failure, shrink) in enumerate(zip(outcome.failures, outcome.shrinks, strict=True), 1):
            search_info = {
                "profile": profile,
                "cases": len(outcome.results),
                "failure": f"{n} of {len(outcome.failures)}",
                "signature": str(signatures.signature(failure, kernel)),
                "shrunk": shrink.shrunk,
                "shrink_runs": shrink.runs,
                "shrink_exhausted": shrink.exhausted,
            }
            path = write_failure(
                args.out,
                failure,
                kernel=kernel,
                oracles=oracles,
                grads=grads,
                time_limit=time_limit,
                interpret=options,
                search=search_info,
            )
            store.write_case(failure, shrunk=True, failure_file=str(path))
            failures.append((kernel.name, failure, path))
        if outcome.interrupted:
            return True
    return False
