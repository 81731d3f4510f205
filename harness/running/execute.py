"""Running one implementation on one case, before any comparison: the leaf the runner and the worker share.

`execute` runs in the harness process (harness.running.runner) and, under a per-case time limit,
inside the worker process (harness.running.worker); both import it from here, so neither imports
the other for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback

from harness.core import emptygrads
from harness.core.case import Case
from harness.core.contract import Implementation, Outputs
from harness.core.errors import one_line
from harness.core.inputs import Inputs
from harness.runtime import interpret as interpreters
from harness.runtime import versions
from harness.runtime.interpret import InterpretOptions
from harness.runtime.races import RaceCounter
from harness.tpu import native


@dataclasses.dataclass(kw_only=True)
class Execution:
    """What running one implementation produced, before any comparison.

    races: None when race detection was off. reordered: the outputs of a second run with
    another interpreter grid order (None when the grid-order check was off).
    """

    outputs: Outputs | None
    error: str | None = None
    traceback: str | None = None
    races: bool | None = None
    reordered: Outputs | None = None
    # A second run on fresh copies of the inputs (harness.running.determinism): its outputs, or its error.
    rerun: Outputs | str | None = None
    seconds: float = 0.0
    native: dict | None = None  # harness.tpu.native timings, for a kernel on an accelerator
    # The worker process died or was killed past its time limit (harness.running.worker): the kernel
    # took its process down, never a refusal of the case it raised as an exception.
    lost: bool = False
    # The error, where it says the installed jax lacks an API the adapter calls (versions.missing_api):
    # what a probe reads (harness.running.probes), never the kernel's failure.
    api_gap: str | None = None


def is_interrupt(e: BaseException) -> bool:
    """True for Ctrl-C however it arrives.

    A KeyboardInterrupt raised while a jax host callback runs (the Pallas TPU interpreter
    runs every kernel step in one) reaches the caller as a JaxRuntimeError whose text names
    it: "INTERNAL: ... KeyboardInterrupt". The chained cause or context may hold it too.
    """
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt) or "KeyboardInterrupt" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def _run(impl: Implementation, case: Case, inputs: Inputs, *, grads: bool, interpret: InterpretOptions) -> Outputs:
    if grads:  # no cotangent on rows whose gradient `impl` leaves undefined (harness.core.emptygrads)
        inputs = emptygrads.subject_inputs(impl, case, inputs)
    with interpreters.using_interpret_options(interpret):
        return impl.run(case, inputs, grads=grads)


def execute(impl: Implementation, case: Case, inputs: Inputs, *, grads: bool, interpret: InterpretOptions) -> Execution:
    """Run `impl` under the interpreter options `interpret` (their checks included).

    An exception is returned as an error, never raised, and leaves the interpreter reset;
    an interrupt (see is_interrupt) is raised as KeyboardInterrupt, never a kernel result.
    """
    start = time.perf_counter()
    interpreted = impl.backend() == "tpu_interpret"
    # Races and grid order are the TPU interpret mode's checks; the HLO interpreter has neither.
    checked = interpreted and interpret.interpreter == "faithful"
    counter = RaceCounter()
    # Outside the try: a jax with no race state to count is the harness's gap, never the kernel's error.
    counting = counter.counting() if checked and interpret.detect_races else contextlib.nullcontext()
    try:
        with counting:
            got = _run(impl, case, inputs, grads=grads, interpret=interpret)
            reordered = None
            if checked and interpret.check_grid_order:
                # Another permutation of the 'parallel' grid axes (the interpreter's default seed is 0).
                other = dataclasses.replace(interpret, random_seed=(interpret.random_seed or 0) + 1)
                reordered = _run(impl, case, inputs, grads=grads, interpret=other)
    except interpreters.InterpreterUnavailable:
        raise  # the installed jax lacks the interpreter asked for: the harness's gap, not a finding
    except Exception as e:  # noqa: BLE001 - a kernel's exception is a finding, not a harness crash
        if interpreted:
            interpreters.reset_tpu_interpreter()
        if is_interrupt(e):
            raise KeyboardInterrupt(one_line(e)) from e
        return Execution(
            outputs=None,
            error=one_line(e),
            traceback=traceback.format_exc(limit=8),
            seconds=time.perf_counter() - start,
            api_gap=versions.missing_api(e),
        )
    races = counter.found if checked and interpret.detect_races else None
    seconds = time.perf_counter() - start
    timing = native.measure(impl, case, grads=grads).to_json() if native.measured(impl) else None
    return Execution(outputs=got, races=races, reordered=reordered, seconds=seconds, native=timing)
