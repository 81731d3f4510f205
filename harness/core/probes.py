"""Where an adapter's probe calls its kernel: the one kernel call that belongs to no case.

An adapter probes the installed library by calling its kernel on one small case (kernels/_pallas.py:
which Pallas interpreters run it, whether the jax it calls has the APIs the adapter uses). That call is
kernel code like any other: a fork can crash, exit or hang in it. `call` runs it in this process by
default (a test, a tool); every CLI command installs `harness.running.probes.in_worker`, so that a
kernel misbehaving on its probe takes down a worker process, never the run that depends on the answer.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from harness.core.errors import one_line
from harness.runtime import interpret, versions

if TYPE_CHECKING:
    from harness.core.case import Case
    from harness.core.contract import Implementation


@dataclasses.dataclass(frozen=True, kw_only=True)
class Probe:
    """What one probe call of a kernel gave."""

    error: str | None = None  # the kernel's error on the probe case, one line; None: it ran
    api_gap: str | None = None  # the error, where it says the installed jax lacks an API (versions.missing_api)
    # The call took its process down (a crash, an exit, a hang past the time limit): the kernel's own
    # failure, for the run's cases to find and report, never an interpreter's refusal of the kernel.
    lost: bool = False

    @property
    def refusal(self) -> str | None:
        """The error that says this interpreter cannot run the kernel; None where it ran or was lost."""
        return None if self.lost else self.error


# (implementation, case, grads, interpreter name) -> Probe
ProbeCall = Callable[["Implementation", "Case", bool, str], Probe]


def in_process(impl: Implementation, case: Case, grads: bool, interpreter: str) -> Probe:
    """The probe call in this process: the kernel's exception is the answer."""
    from harness.core.inputs import make_inputs

    try:
        with interpret.using_interpret_options(interpret.InterpretOptions(interpreter=interpreter)):
            impl.run(case, make_inputs(case), grads=grads)
    except Exception as e:  # noqa: BLE001 - the kernel's (or its interpreter's) own error is the answer
        return Probe(error=one_line(e), api_gap=versions.missing_api(e))
    return Probe()


_call: ProbeCall = in_process


def call(impl: Implementation, case: Case, *, grads: bool, interpreter: str = "fast") -> Probe:
    """Call `impl` on `case` once, under `interpreter` where it is interpreted, where probes run now."""
    return _call(impl, case, grads, interpreter)


@contextlib.contextmanager
def calling(how: ProbeCall) -> Iterator[None]:
    """Probes inside call the kernel with `how` (the CLI: in a worker process)."""
    global _call
    before, _call = _call, how
    try:
        yield
    finally:
        _call = before
