"""A run as an object: `RunPlan` holds everything one `run` needs, `run_session` carries it out.

The plan is frozen and keyword-only, validates itself, and writes itself back as a command line
(`RunPlan.to_argv`, derived from the fields): the workers of `run --jobs` and the shards CI starts
get exactly this run, and an option is never written twice. `run_session(plan, sink, stop)` builds
the run's store through its sink, searches each kernel, writes the failure files, merges the
shards of `--jobs` and decides the exit status; the CLI only parses a plan and prints the outcome.
A stop (Ctrl-C, `kill`) reaches the run as a `StopToken` the caller's signal handler sets; the sink, the
stop token and each case's recorder are harness.running.sink's, so the search never calls back up into this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from harness.core import contract, exit_codes, features, profiles
from harness.core.errors import InputError
from harness.core.exit_codes import EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_HARNESS, EXIT_OK
from harness.core.summary import KernelSummary
from harness.running import exactness, known, settle, summaries, worker
from harness.running.jobs import processes, same_bug, shard, stores, stream
from harness.running.jobs import summaries as shard_summaries
from harness.running.plan import RunPlan
from harness.running.runner import Check
from harness.running.search import Search, SearchOptions, SearchOutcome
from harness.running.settle import Failure
from harness.running.sink import CaseRecorder, Sink, StopToken, create_dir
from harness.runtime import placement, versions
from harness.store.schema import KernelStatus, RunStatus
from harness.tpu import crosscheck

# The same-dtype JAX oracle that is the ruler every subject is measured by (never a subject itself: the
# default oracles are all but it).
RULER = "jax_reference"
# A shard's run.json statuses that say it did everything it was asked to (or could not run the kernel here).
_SETTLED = (RunStatus.FINISHED, RunStatus.CANNOT_RUN)


def resolve(specs: list[str] | tuple[str, ...], role: str) -> list[contract.Implementation]:
    """The implementations `specs` name; an unknown or broken one is bad input (exit 2)."""
    out = []
    for spec in specs:
        try:
            impl = contract.resolve(spec)
        except contract.UnknownImplementation:
            raise  # an InputError: its message names the spec and what exists
        except Exception as e:  # noqa: BLE001 - importing a MODULE:ATTR drop-in runs its code: bad input
            line = (str(e).strip().splitlines() or [""])[0]
            raise InputError(f"--{role} {spec!r} failed to load: {type(e).__name__}: {line}; fix that module") from None
        if role == "oracle" and impl.role != "oracle":
            raise InputError(f"--oracle {spec!r} is a {impl.role}; oracles: {contract.names('oracle')}")
        out.append(impl)
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Merged:
    """What the parent of a `run --jobs` adds to the merged summary."""

    jobs: int
    run_ids: tuple[str, ...]
    coverage: tuple[str, ...]  # per kernel, its pairwise coverage line over every worker's cases
    lost: tuple[str, ...]  # per worker killed before it could say why, how it ended
    same_bug: tuple[str, ...] = ()  # per failure another shard's explains, which (same_bug.same_bugs)
    nested: tuple[str, ...] = ()  # kept failures of two shards whose triggers nest (same_bug.nested)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """How a run ended: its exit status, summary rows, failures, and where its records are."""

    code: int
    rows: tuple[KernelSummary, ...]
    records: Path  # the run's directory, or (a --jobs run) the store its workers share
    out: Path
    failures: tuple[Failure, ...] = ()
    interrupted: bool = False
    merged: Merged | None = None
    # Findings expected by --known whose own case passes now (harness.running.known.still_fails): each fails the run.
    unexpected_passes: tuple[str, ...] = ()


def run_session(plan: RunPlan, sink: Sink, stop: StopToken) -> RunOutcome:
    """Carry out `plan`: in this process, or (jobs > 1) as that many worker processes into one store.

    Raises InputError for bad input (said before any case runs), and any other exception for the
    harness's own failure, with run.json saying "failed".
    """
    if not os.environ.get(processes.PARENT_ENV):  # a worker of `run --jobs`: its parent said it
        installed = versions.library_versions()
        sink.say("versions: " + ", ".join(f"{name} {v}" for name, v in installed.items() if v and name != "harness"))
    if plan.jobs > 1:
        return _run_jobs(plan, sink)
    with worker.session():  # the run's own kernel worker, closed with the run
        return _run_here(plan, sink, stop)


@dataclasses.dataclass(kw_only=True)
class _Run:
    """One run in this process while it goes: what it checks, and what it has found so far."""

    plan: RunPlan
    sink: Sink
    stop: StopToken
    kernels: list[contract.Implementation]
    oracles: list[contract.Implementation]
    meta: dict[str, Any]
    time_limit: float | None
    records: Path  # the run's directory in the store
    rows: list[KernelSummary] = dataclasses.field(default_factory=list)
    failures: list[Failure] = dataclasses.field(default_factory=list)
    unexpected_passes: list[str] = dataclasses.field(default_factory=list)


def _prepare(plan: RunPlan, sink: Sink, stop: StopToken) -> _Run:
    """Resolve the plan's implementations, check what needs them, and open the store."""
    kernels = resolve(plan.kernels, "kernel")
    known.check_names(plan.known)
    if plan.cross_interpret and not crosscheck.twins(kernels):
        raise InputError("--cross-interpret needs a kernel running natively on a TPU; here none does")
    if plan.cross_interpret and plan.case_timeout is not None:
        raise InputError("--cross-interpret runs its interpreted twins in-process; drop --case-timeout")
    time_limit = plan.time_limit()
    if os.environ.get(exit_codes.PARENT_PID_ENV):
        # A worker of `run --jobs`: stop (as interrupted) when the parent dies, never run on as an orphan.
        worker.die_with_parent(signal.SIGTERM, int(os.environ[exit_codes.PARENT_PID_ENV]))
    default_oracles = [n for n in contract.names("oracle") if n != RULER]
    oracles = resolve(plan.oracles if plan.oracles is not None else default_oracles, "oracle")
    meta: dict[str, Any] = {"command": sys.argv, "profile": plan.profile, "kernels": [k.name for k in kernels]}
    if plan.shard is not None:
        meta["shard"] = str(plan.shard)
    if os.environ.get(processes.PARENT_ENV):
        meta["jobs_parent"] = os.environ[processes.PARENT_ENV]
    meta |= {"interpret": plan.interpret.to_json(), "case_timeout": time_limit}
    # Checked as exact as the installed upstream kernel is: its own behaviour, probed, refines the declaration.
    kernels = exactness.refined(kernels, sink.say)
    # The report renders conventions from records, never from live objects.
    meta["conventions"] = {i.name: i.conventions.to_json() for i in (*kernels, *oracles)}
    # Where each side computed: kernels on the accelerator, the references on the CPU (harness.runtime.placement).
    meta["placement"] = {"references": placement.describe(placement.reference_device())}
    meta["placement"] |= {i.name: i.device() for i in (*kernels, *oracles)}
    records = sink.open(meta, [i.name for i in (*kernels, *oracles)])
    sink.say(f"results -> {records}")
    sink.say(f"references (float64 truth, ruler, oracles) on {meta['placement']['references']}")
    implementations = {"kernels": kernels, "oracles": oracles}
    return _Run(plan=plan, sink=sink, stop=stop, meta=meta, time_limit=time_limit, records=records, **implementations)


def _run_here(plan: RunPlan, sink: Sink, stop: StopToken) -> RunOutcome:
    """The run in this process: each kernel searched in turn; run.json always ends with a status."""
    run = _prepare(plan, sink, stop)
    interrupted = False
    try:
        interrupted = _run_kernels(run)
    except KeyboardInterrupt:
        interrupted = True
    except SystemExit as e:
        # Only kernel code run in this process (--in-process) exits mid-run: never a pass (exit 3).
        error = f"SystemExit({e.code!r}) inside the run: a kernel run with --in-process exited"
        _write_failed(run, error)
        raise RuntimeError(f"{error}; run it without --in-process to see that kernel's failure recorded") from None
    except Exception as e:
        if not stop.requested():
            _write_failed(run, f"{type(e).__name__}: {e}"[:500])
            raise
        # A stop that landed inside a library which turned its KeyboardInterrupt into an error of
        # its own (Hypothesis's wrapped_test asserts on its state): the run was interrupted, not broken.
        interrupted = True
    except BaseException as e:
        _write_failed(run, f"{type(e).__name__}: {e}"[:500])
        raise
    finally:
        stop.settle()
        worker.shutdown()
    cannot = {r.kernel: r.error for r in run.rows if r.status == KernelStatus.CANNOT_RUN}
    status = RunStatus.INTERRUPTED if interrupted else (RunStatus.CANNOT_RUN if cannot else RunStatus.FINISHED)
    sink.write_meta({**run.meta, "status": status, "summary": _json(run.rows), "cannot_run": cannot})
    code = exit_code(run.rows, run.failures, interrupted=interrupted)
    return RunOutcome(
        code=EXIT_FAIL if run.unexpected_passes and code in (EXIT_OK, EXIT_CANNOT_RUN) else code,
        rows=tuple(run.rows),
        records=run.records,
        out=plan.out,
        failures=tuple(run.failures),
        interrupted=interrupted,
        unexpected_passes=tuple(run.unexpected_passes),
    )


def exit_code(rows: list[KernelSummary], failures: list[Failure], *, interrupted: bool) -> int:
    """1 for a stop, a failure or a kernel that did not pass; 4 where a kernel cannot run here; else 0.
    Oracle and interpreter-divergence rows never fail the run: their findings are reported apart; nor do the
    failures of a finding the run was told to expect (--known)."""
    if interrupted:
        return EXIT_FAIL
    passing = (KernelStatus.PASS, KernelStatus.CANNOT_RUN, KernelStatus.KNOWN_FAIL)
    new = [f for f in failures if f.known is None or not f.known.expected]
    if new or any(r.status not in passing for r in rows if r.is_kernel):
        return EXIT_FAIL
    return EXIT_CANNOT_RUN if any(r.status == KernelStatus.CANNOT_RUN for r in rows) else EXIT_OK


def _json(rows: list[KernelSummary]) -> list[dict[str, Any]]:
    return [r.to_json() for r in rows]


def _write_failed(run: _Run, error: str) -> None:
    """run.json says "failed" with the error (exit 3 in harness.cli): it must not stay "running"."""
    with contextlib.suppress(OSError):
        run.sink.write_meta({**run.meta, "status": RunStatus.FAILED, "error": error, "summary": _json(run.rows)})


def _run_kernels(run: _Run) -> bool:
    """Search each kernel in turn, adding its summary rows and failures; True if interrupted."""
    plan = run.plan
    for kernel in run.kernels:
        # What its cases are checked with, built once and passed whole. A forward-only kernel (no VJP: the decode
        # kernels) is checked, and replayed, forward only.
        grads, limit = plan.grads and kernel.capabilities.grads, run.time_limit
        check = Check(kernel=kernel, oracles=run.oracles, grads=grads, interpret=plan.interpret, time_limit=limit)
        n = _examples(plan, kernel)
        _say_kernel(run, check, n)
        reason = kernel.cannot_run()
        if reason is not None:
            # A result, not a skip: recorded in run.json with the interpreter's own error.
            run.sink.say(f"   {KernelStatus.CANNOT_RUN}: {reason}")
            run.rows.append(summaries.cannot_run_row(kernel.name, reason))
            continue
        start = time.perf_counter()
        outcome = _search(run, check, n)
        after = settle.Settle(check=check, out=plan.out, profile=plan.profile, known=plan.known, sink=run.sink)
        named = {} if outcome.interrupted else after.confirm(outcome)
        covered = features.coverage(kernel, [r.case for r in outcome.results])
        run.sink.say(f"   {covered.line()}")
        row = summaries.kernel_row(kernel.name, outcome, time.perf_counter() - start, covered, planned=n)
        if named and len(named) == len(outcome.failures) and all(k.expected for k in named.values()):
            row = dataclasses.replace(row, status=KernelStatus.KNOWN_FAIL)
        run.rows.append(row)
        divergence_row = summaries.divergence_row(kernel.name, outcome.results)
        run.rows.extend([divergence_row] if divergence_row else [])
        run.rows.extend(summaries.oracle_rows(outcome.results, run.oracles))
        if outcome.error:
            run.sink.say(f"   {outcome.error}")
        run.failures.extend(after.write_failures(outcome, named))
        if not outcome.interrupted:
            run.unexpected_passes.extend(after.expected_that_pass(named))
        if outcome.interrupted:
            return True
    return False


def _examples(plan: RunPlan, kernel: contract.Implementation) -> int:
    """The cases this run (this shard of it) checks of `kernel`."""
    total = plan.examples or profiles.get(plan.profile).max_examples
    return plan.shard.examples(total) if plan.shard is not None else total


def _say_kernel(run: _Run, check: Check, n: int) -> None:
    kernel = check.kernel
    against = ", ".join(o.name for o in check.oracles) or "the float64 truth only"
    run.sink.say(
        f"== {kernel.name} on {kernel.backend()} ({kernel.device()}) vs {against}, "
        f"up to {n} cases, profile {run.plan.profile}" + (", forward only" if not check.grads else "")
    )
    if kernel.backend() == "tpu_interpret":
        runs_on = ", ".join(kernel.interpreters()) or "none"
        run.sink.say(
            f"   no TPU attached: the kernel runs under a Pallas TPU interpreter on CPU (--interpreter "
            f"{run.plan.interpreter}; it runs under: {runs_on})"
        )


def _search(run: _Run, check: Check, n: int) -> SearchOutcome:
    """One kernel's search, each finished case recorded and said as it comes (harness.running.sink.CaseRecorder)."""
    plan = run.plan
    record = CaseRecorder(
        sink=run.sink,
        stop=run.stop,
        out=plan.out,
        kernel=check.kernel,
        oracles=list(check.oracles),
        grads=check.grads,
        interpret=check.interpret,
        time_limit=check.time_limit,
        total=n,
    )
    shard = plan.shard
    local, shared = plan.example_database()
    options = SearchOptions(
        examples=n,
        seed=plan.seed,
        profile=plan.profile,
        database=local,
        shared_database=shared,
        interpreters=plan.interpreter,
        shrink_runs=plan.max_shrinks,
        smoke=plan.smoke,
        reuse=plan.pool,
        owns=shard.owns if shard is not None and shard.count > 1 else None,
        first_failure=plan.first_failure,
    )
    twins = crosscheck.twins([check.kernel]) if plan.cross_interpret else []
    searched = dataclasses.replace(check, oracles=(*check.oracles, *twins))  # the twins are run, never settled
    return Search(searched, options, on_result=record).run()


def _run_jobs(plan: RunPlan, sink: Sink) -> RunOutcome:
    """`plan.jobs` worker processes, shard i of them each, into one store; then the merged summary.

    The workers' lines are shown as one stream (harness.running.jobs.stream), each worker's whole output kept in
    its log; the workers handle a stop themselves (harness.running.jobs.processes.run_workers forwards it to them).
    """
    kernels = resolve(plan.kernels, "kernel")  # bad input is said once, before any worker starts
    each = _examples(plan, kernels[0]) if kernels else 0
    merge = stream.Merge(jobs=plan.jobs, kernel_cases=each, kernels=len(kernels), show=sink.say)
    exactness.refined(kernels, merge.say)  # probed once here, read from its cache by every worker
    create_dir(plan.out)
    logs = stream.log_dir(plan.out, os.getpid(), time.time())
    sink.say(f"{plan.jobs} worker processes, one shard each, into {plan.out}; up to {merge.total} cases in all")
    done = processes.run_workers(lambda shard: plan.worker(shard).to_argv(), plan.jobs, logs=logs, line=merge.line)
    sink.say(f"each shard's own output, its summary and failures in full: {logs}/shard-*-of-{plan.jobs}.log")
    stores.mark_unfinished(plan.out, done.token, list(done.codes), interrupted=done.interrupted)
    runs = stores.worker_runs(plan.out, done.token)
    ids = tuple(run.run_id for run in runs)
    same_bugs = tuple(b.line() for b in same_bug.same_bugs(plan.out, runs))
    nested = tuple(same_bug.nested(plan.out, runs))
    coverage = tuple(
        f"{k.name}: {features.coverage(k, stores.worker_cases(plan.out, set(ids), k.name)).line()}" for k in kernels
    )
    # A worker killed before it could say why: its run.json says "failed" (or "interrupted").
    lost = tuple(
        f"shard {i}/{plan.jobs}: the worker process {worker.how_it_died(code)}"
        for i, code in enumerate(done.codes)
        if code < 0
    )
    # A shard that ended without finishing its records, whatever its exit status said: never exit 0.
    finished = {shard.Shard.parse(run.shard or "0/1").index for run in runs if run.status in _SETTLED}
    unsettled = tuple(
        f"shard {i}/{plan.jobs}: ended (exit status {code}) without finishing its records"
        for i, code in enumerate(done.codes)
        if code >= 0 and i not in finished and not done.interrupted
    )
    code = EXIT_HARNESS if unsettled and done.code in (EXIT_OK, EXIT_CANNOT_RUN) else done.code
    return RunOutcome(
        code=code,
        rows=tuple(shard_summaries.merge_rows(runs)),
        records=plan.out,
        out=plan.out,
        interrupted=done.interrupted,
        merged=Merged(
            jobs=plan.jobs, run_ids=ids, coverage=coverage, lost=lost + unsettled, same_bug=same_bugs, nested=nested
        ),
    )
