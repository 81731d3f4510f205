"""Run implementations in a worker process, so that a hang or a crash costs one case, not the run.

A call that hangs inside compiled code (an XLA loop that never ends) never returns the
main thread to Python: a watchdog thread cannot stop it and a signal handler never runs.

Under a per-case time limit the runner therefore hands each subject to a worker process
(`python -m harness.running.worker`) and kills it when the limit passes; the next subject gets a
fresh worker. The worker stays alive between cases, so jax's compilation caches and the
imports are paid once per run, not per case, and its start-up is not timed.

Requests carry the implementation's spec (a registry name or MODULE:ATTR), the case as
JSON and the interpreter options; the worker rebuilds the inputs (deterministic in the
case) and returns a harness.running.execute.Execution. Comparison stays in the parent.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from harness.core import compat
from harness.core.case import Case
from harness.core.contract import Implementation, registry
from harness.running.execute import Execution

# Importing jax, torch and every registered implementation takes seconds, several times
# longer on a loaded machine; the start-up is not part of any case's time limit.
STARTUP_LIMIT_S = 300.0
# The worker's reply when the implementation's call was interrupted: never a kernel result.
INTERRUPTED = "interrupted"


def implementation_spec(impl: Implementation) -> str:
    """A string `contract.resolve` turns back into `impl` in another process."""
    if ":" in impl.name or registry().get(impl.name) is impl:
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

    def start(self) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.running.worker", str(to_worker_r), str(from_worker_w)],
            pass_fds=(to_worker_r, from_worker_w),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        os.close(to_worker_r)
        os.close(from_worker_w)
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
        self.proc = self.inbox = self.outbox = None

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
        self, spec: str, case: Case, *, grads: bool, time_limit: float, interpret: compat.InterpretOptions
    ) -> Execution:
        start = time.perf_counter()
        if not self.alive:
            try:
                self.start()
            except (RuntimeError, OSError, EOFError) as e:
                self.kill()
                return Execution(outputs=None, error=f"WorkerDied: {e}")
            start = time.perf_counter()
        self.outbox.send((spec, case.to_json(), grads, interpret.to_json()))
        if not self.inbox.poll(time_limit):
            self.kill()
            return Execution(
                outputs=None,
                error=f"TimeoutError: no result within the per-case time limit of {time_limit:g} s; worker killed",
                seconds=time.perf_counter() - start,
            )
        try:
            reply = self.inbox.recv()
        except (EOFError, OSError):
            code = self.proc.wait() if self.proc is not None else None
            self.kill()
            return Execution(
                outputs=None,
                error=f"WorkerDied: the worker process exited with status {code} while running {spec}",
                seconds=time.perf_counter() - start,
            )
        if reply == INTERRUPTED:
            raise KeyboardInterrupt(f"interrupted inside {spec} in the worker")
        return reply


_worker = Worker()
atexit.register(_worker.close)


def execute(
    impl: Implementation, case: Case, *, grads: bool, time_limit: float, interpret: compat.InterpretOptions
) -> Execution:
    """harness.running.execute.execute in the worker process, killed after `time_limit` seconds."""
    try:
        spec = implementation_spec(impl)
    except ValueError as e:
        return Execution(outputs=None, error=f"ValueError: {e}")
    try:
        return _worker.execute(spec, case, grads=grads, time_limit=time_limit, interpret=interpret)
    except BaseException:
        # Ctrl-C or a harness error while waiting: never leave a worker behind.
        _worker.kill()
        raise


def shutdown() -> None:
    _worker.close()


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when the harness dies, even by SIGKILL mid-hang."""
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _serve(inbox: Connection, outbox: Connection) -> None:
    setup: dict[str, Any] = inbox.recv()
    sys.path[:0] = [p for p in setup["sys_path"] if p not in sys.path]
    compat.default_platforms_env()
    from harness.core import contract
    from harness.core.inputs import make_inputs
    from harness.running.execute import execute

    contract.registry()
    outbox.send("ready")
    impls: dict[str, Implementation] = {}
    while True:
        try:
            request = inbox.recv()
        except EOFError:
            return
        if request is None:
            return
        spec, case_json, grads, options = request
        try:
            if spec not in impls:
                impls[spec] = contract.resolve(spec)
            interpret = compat.InterpretOptions.from_json(options)
            case = Case.from_json(case_json)
            result = execute(impls[spec], case, make_inputs(case), grads=grads, interpret=interpret)
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
    _die_with_parent()
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
