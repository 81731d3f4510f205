"""Adapters' probe calls in a worker process of their own (harness.core.probes.calling installs it).

A fresh worker per probe: a kernel that misbehaves on its first call in a process (a crash, an exit,
NaN) does so here, unjudged, and its run's own worker still starts from a first call that is judged.
"""

from __future__ import annotations

from harness.core.case import Case
from harness.core.contract import Implementation
from harness.core.probes import Probe, in_process
from harness.running import worker
from harness.runtime.compat import InterpretOptions


def in_worker(impl: Implementation, case: Case, grads: bool, interpreter: str) -> Probe:
    """`impl` on `case` in a new worker process, stopped after the default per-case time limit."""
    try:
        worker.implementation_spec(impl)
    except ValueError:
        # Not importable in another process (an object built in a test): only this process can call it.
        return in_process(impl, case, grads, interpreter)
    own = worker.Worker()
    try:
        ex = worker.execute(
            impl,
            case,
            grads=grads,
            time_limit=worker.default_time_limit(),
            interpret=InterpretOptions(interpreter=interpreter),
            worker=own,
        )
    finally:
        own.close()
    return Probe(error=ex.error, api_gap=ex.api_gap, lost=ex.lost)
