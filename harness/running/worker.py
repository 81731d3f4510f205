"""Run implementations in a worker process, so that a hang or a crash costs one case, not the run.

A call that hangs inside compiled code (an XLA loop that never ends) never returns the
main thread to Python: a watchdog thread cannot stop it and a signal handler never runs.

Under a per-case time limit the runner therefore hands each subject to a worker process
(`python -m harness.running.worker`) and kills it when the limit passes; the next subject gets a
fresh worker. The worker stays alive between cases, so jax's compilation caches and the
imports are paid once per run, not per case, and its start-up is not timed.

Requests carry the implementation's spec (a registry name or MODULE:ATTR), the case as
JSON, the interpreter options and, for the batch check, the batch row to run alone; the
worker rebuilds the inputs (deterministic in the case, the row cut from them) and returns a
harness.running.execute.Execution. Comparison stays in the parent.

`run` hands every kernel to the worker by default (DEFAULT_TIME_LIMIT_S); the references and
oracles that judge it stay in the harness, out of reach of a kernel's crash, exit or global
side effects. A worker that dies is reported with how it died and the last lines it wrote to
stderr (faulthandler on: a native crash leaves its Python stack there), and the next case gets
a fresh worker.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import contextvars
import dataclasses
import faulthandler
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from harness.core import contract
from harness.core.case import Case
from harness.core.contract import Implementation, Outputs
from harness.running.execute import Execution
from harness.runtime import compat, phases, teardown

# Importing jax, torch and an implementation's module takes seconds, several times longer on a
# loaded machine; neither the start-up nor loading the implementation is part of a case's time limit.
STARTUP_LIMIT_S = 300.0
# The worker's reply when the implementation's call was interrupted: never a kernel result.
INTERRUPTED = "interrupted"
# The worker's word that the implementation is loaded and its inputs built: the time limit starts.
STARTED = "started"
# `run`'s per-case time limit when --case-timeout is not given: every kernel call runs in the
# worker. The slowest kernel call measured in a 50-case dev-profile run of pallas_flash on a 2-core
# machine at load average 7 (README "Exit codes, time limits and interrupts") took SLOWEST_MEASURED_S,
# compilation included (a 20-case ci run: 10.9 s); the default is six times that: only a hang reaches it.
SLOWEST_MEASURED_S = 47.6
DEFAULT_TIME_LIMIT_S = 300.0
# Overrides the default (seconds): a slow machine's CI, or a test of a hang that cannot wait minutes.
TIME_LIMIT_ENV = "ATTN_HARNESS_CASE_TIMEOUT"
# Lines of a dead worker's stderr kept for its failure record.
STDERR_TAIL_LINES = 20
# On a CPU host the kernel runs as an interpreter's XLA program (its whole grid unrolled into while
# loops), compiled once per program and then run a few times. At XLA's CPU optimization level 1
# instead of the default 3, the first calls of pallas_flash's and pallas_splash's 17 smoke cases
# (fwd+bwd, tracing included) took 12% less CPU and every output and gradient was bitwise the same
# (benchmarks/worker_xla_opt.py; a lone fwd+bwd compile: 27% less). A run that checks many programs
# pays compilation per program, so this is breadth per CPU-minute. CPU only: on a TPU or GPU the
# kernel compiles natively, and the flag would change that compile. A level set in XLA_FLAGS wins.
CPU_OPT_FLAG = "--xla_backend_optimization_level"
CPU_OPT_LEVEL = 1


def worker_env(environ: dict[str, str], platform: str) -> dict[str, str]:
    """The worker's environment: `environ`, with XLA's CPU optimization level lowered on a CPU host."""
    env = dict(environ)
    flags = env.get("XLA_FLAGS", "")
    if platform == "cpu" and CPU_OPT_FLAG not in flags:
        env["XLA_FLAGS"] = f"{flags} {CPU_OPT_FLAG}={CPU_OPT_LEVEL}".strip()
    return env


def default_time_limit() -> float:
    """$ATTN_HARNESS_CASE_TIMEOUT, else DEFAULT_TIME_LIMIT_S; a ValueError naming a bad value."""
    chosen = os.environ.get(TIME_LIMIT_ENV)
    if not chosen:
        return DEFAULT_TIME_LIMIT_S
    try:
        limit = float(chosen)
    except ValueError:
        limit = float("nan")
    if not (limit > 0 and limit != float("inf")):
        raise ValueError(f"{TIME_LIMIT_ENV}={chosen!r} must be a positive number of seconds")
    return limit


def how_it_died(code: int | None) -> str:
    """A worker's exit status in words: 'was killed by SIGSEGV', 'exited with status 0'."""
    if code is None:
        return "closed its pipe"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _builtin(name: str) -> Implementation | None:
    try:
        return contract.resolve(name)  # a registry name imports only its own module
    except contract.UnknownImplementation:
        return None


def implementation_spec(impl: Implementation) -> str:
    """A string `contract.resolve` turns back into `impl` in another process."""
    if ":" in impl.name or _builtin(impl.name) is (impl.original or impl):
        return impl.name
    module = sys.modules.get(type(impl).__module__)
    for attr, value in vars(module or object()).items():
        if value is impl:
            return f"{module.__name__}:{attr}"
    raise ValueError(
        f"implementation {impl.name!r} is neither registered nor a module attribute; "
        "a time limit needs it importable as MODULE:ATTR"
    )


class Worker:
    """One worker process and the two pipes to it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.inbox: Connection | None = None  # worker -> harness
        self.outbox: Connection | None = None  # harness -> worker
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        env = worker_env(dict(os.environ), compat.jax_platform()) | phases.child_env()
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        argv = [str(to_worker_r), str(from_worker_w), str(os.getpid())]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.running.worker", *argv],
            pass_fds=(to_worker_r, from_worker_w),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.stderr = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._reader = threading.Thread(target=_keep_tail, args=(self.proc.stderr, self.stderr), daemon=True)
        self._reader.start()
        self.outbox = Connection(to_worker_w, readable=False)
        self.inbox = Connection(from_worker_r, writable=False)
        self.outbox.send({"sys_path": list(sys.path)})
        if not self.inbox.poll(STARTUP_LIMIT_S):
            self.kill()
            raise RuntimeError(f"the worker process did not start within {STARTUP_LIMIT_S:g} s")
        self.inbox.recv()  # "ready"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for conn in (self.inbox, self.outbox):
            if conn is not None:
                conn.close()
        if self._reader is not None:
            self._reader.join(timeout=5)  # the pipe ends with the process
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = self.inbox = self.outbox = self._reader = None

    def _died(self, spec: str, start: float) -> Execution:
        """The execution of a worker that died mid-call: how, and the last lines of its stderr."""
        code = self.proc.wait() if self.proc is not None else None
        self.kill()
        tail = [line for line in self.stderr if line.strip()]
        # faulthandler's first line names a native crash ("Fatal Python error: Segmentation fault").
        said = [line for line in tail if line.startswith("Fatal Python error")] or tail
        last = f"; stderr: {said[-1].strip()[:200]}" if said else ""
        return Execution(
            outputs=None,
            error=f"WorkerDied: the worker process {how_it_died(code)} while running {spec}{last}",
            traceback="\n".join(tail) or None,
            seconds=time.perf_counter() - start,
            lost=True,
        )

    def close(self) -> None:
        """Ask the worker to finish, then make sure it has."""
        if self.outbox is not None:
            try:
                self.outbox.send(None)
            except OSError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def execute(
        self,
        spec: str,
        case: Case,
        *,
        grads: bool,
        time_limit: float,
        interpret: compat.InterpretOptions,
        row: int | None = None,
    ) -> Execution:
        """Run `spec` on `case` here; row: batch row `row` of the case alone instead (harness.running.batch)."""
        start = time.perf_counter()
        if not self.alive:
            try:
                self.start()
            except (RuntimeError, OSError, EOFError) as e:
                self.kill()
                return Execution(outputs=None, error=f"WorkerDied: {e}", lost=True)
            start = time.perf_counter()
        self.outbox.send((spec, case.to_json(), grads, interpret.to_json(), row))
        # Importing the implementation's module and building the inputs are not the kernel's time.
        if not self.inbox.poll(STARTUP_LIMIT_S):
            self.kill()
            error = f"WorkerDied: {spec} was not loaded within {STARTUP_LIMIT_S:g} s"
            return Execution(outputs=None, error=error, lost=True)
        try:
            reply = self.inbox.recv()
            if reply == STARTED:
                start = time.perf_counter()
                if not self.inbox.poll(time_limit):
                    self.kill()
                    return Execution(
                        outputs=None,
                        error=f"TimeoutError: no result within the per-case time limit of {time_limit:g} s; "
                        "worker killed",
                        seconds=time.perf_counter() - start,
                        lost=True,
                    )
                reply = self.inbox.recv()
        except (EOFError, OSError):
            return self._died(spec, start)
        if reply == INTERRUPTED:
            raise KeyboardInterrupt(f"interrupted inside {spec} in the worker")
        return reply


# The worker that `execute` hands calls to: the one a `session` opened in this context, else the
# process's default (created on first use, closed at exit). A session owns its worker; code that runs
# cases outside one (a test, a replay) shares the default.
_session: contextvars.ContextVar[Worker | None] = contextvars.ContextVar("worker_session", default=None)


@functools.cache
def _default() -> Worker:
    worker = Worker()
    atexit.register(worker.close)
    return worker


def current() -> Worker:
    """The worker `execute` uses here: the open session's, else the process's default."""
    return _session.get() or _default()


@contextlib.contextmanager
def session() -> Iterator[Worker]:
    """A worker of its own for the calls inside (a run's session owns it), closed on the way out."""
    worker = Worker()
    token = _session.set(worker)
    try:
        yield worker
    finally:
        _session.reset(token)
        worker.close()


def execute(
    impl: Implementation,
    case: Case,
    *,
    grads: bool,
    time_limit: float,
    interpret: compat.InterpretOptions,
    worker: Worker | None = None,
    row: int | None = None,
) -> Execution:
    """harness.running.execute.execute in a worker process (`worker`, else `current()`), killed after
    `time_limit` seconds; row: batch row `row` of `case` alone (harness.core.rows.batch_row)."""
    try:
        spec = implementation_spec(impl)
    except ValueError as e:
        return Execution(outputs=None, error=f"ValueError: {e}")
    worker = worker or current()
    try:
        return worker.execute(spec, case, grads=grads, time_limit=time_limit, interpret=interpret, row=row)
    except BaseException:
        # Ctrl-C or a harness error while waiting: never leave a worker behind.
        worker.kill()
        raise


def shutdown() -> None:
    """Close the worker `execute` uses here (the next call starts a fresh one)."""
    current().close()


def _keep_tail(pipe: Any, tail: collections.deque[str]) -> None:
    """Read a worker's stderr to its end, keeping the last lines (the pipe never fills and blocks it)."""
    try:
        for raw in pipe:
            tail.append(raw.decode(errors="replace").rstrip("\n"))
    except (OSError, ValueError):
        pass


def die_with_parent(sig: int, parent: int | None) -> None:
    """Linux: this process gets `sig` when its parent dies, even by SIGKILL mid-hang.

    parent: the pid it was started by; if that parent is already gone (it died before the
    request took effect: the process was adopted), this process exits now.
    """
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, sig)
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def checked(ex: Execution) -> Execution:
    """`ex`, or a failed Execution when the implementation returned something other than Outputs
    of numpy arrays (a tuple, a list, a jax array): its contract's error, not the harness's crash."""
    got = ex.outputs
    if got is None:
        return ex
    if not isinstance(got, Outputs):
        return Execution(outputs=None, error=f"TypeError: run() returned {type(got).__name__}, not Outputs")
    for field in dataclasses.fields(got):
        value = getattr(got, field.name)
        if value is not None and not isinstance(value, np.ndarray):
            error = f"TypeError: run() returned Outputs.{field.name} of type {type(value).__name__}, not a numpy array"
            return Execution(outputs=None, error=error, seconds=ex.seconds)
    return ex


def _serve(inbox: Connection, outbox: Connection) -> None:
    setup: dict[str, Any] = inbox.recv()
    sys.path[:0] = [p for p in setup["sys_path"] if p not in sys.path]
    compat.default_platforms_env()
    # Before anything compiles (JAX decides at its first compile): the fast interpreter's programs
    # have no host callbacks, so the next run reads them from disk.
    compat.enable_compilation_cache()
    from harness.core import contract
    from harness.core.inputs import make_inputs
    from harness.core.rows import batch_row
    from harness.running.execute import execute

    phases.start(os.environ.get(phases.ROLE_ENV, "worker"))
    outbox.send("ready")
    impls: dict[str, Implementation] = {}
    while True:
        try:
            request = inbox.recv()
        except EOFError:
            return
        if request is None:
            return
        spec, case_json, grads, options, row = request
        try:
            if spec not in impls:
                with phases.phase("kernel import"):
                    impls[spec] = contract.resolve(spec)
            interpret = compat.InterpretOptions.from_json(options)
            case = Case.from_json(case_json)
            with phases.phase("inputs"):
                inputs = make_inputs(case)
                if row is not None:
                    case, inputs = batch_row(case, inputs, row)
            outbox.send(STARTED)
            with phases.phase("kernel calls"):
                result = checked(execute(impls[spec], case, inputs, grads=grads, interpret=interpret))
        except KeyboardInterrupt:
            # execute saw an interrupt inside a host callback: the harness stops, the
            # kernel is not blamed (this process ignores SIGINT, so it came from the callback).
            result = INTERRUPTED
        except Exception as e:  # noqa: BLE001 - reported to the harness as this subject's error
            result = Execution(outputs=None, error=f"{type(e).__name__}: {e}"[:500])
        outbox.send(result)


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group; the harness decides, and kills this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(signal.SIGKILL, int(sys.argv[3]))
    # A native crash (abort, segfault) writes its Python stack to stderr, which the harness keeps.
    faulthandler.enable()
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
    teardown.exit_now(0)
