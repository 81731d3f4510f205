"""CPU seconds per phase of a run, off unless $ATTN_HARNESS_PHASES names a directory.

Each process that calls `start` (the run's process, every kernel worker) keeps, per phase name, the
CPU seconds (user+sys of the whole process, its threads included) spent inside that phase and not
inside a phase nested in it, and writes them to `<dir>/phases-<role>-<pid>.json` at exit.
benchmarks/run_phases.py sums them over a run's processes.

A phase whose own time included a JAX compile request (a program not in JAX's in-memory cache:
compiled by XLA, or read back from the persistent compilation cache) is kept apart as
"<name> compile": tracing, lowering and compiling cost seconds where a reused program costs
hundredths. Every process also counts its compile requests and how many the persistent cache served.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import dataclasses
import functools
import json
import os
import resource
from collections.abc import Callable, Iterator
from typing import Any

# The directory each process writes its phases to; unset or empty: no phase is timed.
PHASES_ENV = "ATTN_HARNESS_PHASES"
# A worker's role: the phase its parent was in when it started it ("probes", "kernel calls").
ROLE_ENV = "ATTN_HARNESS_PHASES_ROLE"
# JAX's monitoring events (jax._src.dispatch, jax._src.compiler): one compile request (a miss of the
# in-memory cache, whether XLA compiles it or the persistent cache serves it), and one served from disk.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
# Wall seconds of a compile request's steps (jax._src.dispatch, jax._src.compiler), summed per step.
COMPILE_STEPS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    COMPILE_EVENT: "backend",  # XLA's compile, or the persistent cache's read where it serves the program
    "/jax/compilation_cache/cache_retrieval_time_sec": "cache read",
}
COMPILE_SUFFIX = " compile"
# The phase of a process's CPU before `start`: interpreter start-up and imports.
STARTUP = "process start"


@dataclasses.dataclass(kw_only=True)
class _Frame:
    name: str
    cpu: float  # process CPU seconds when the phase began
    compiles: int  # compile requests seen when it began
    child_cpu: float = 0.0
    child_compiles: int = 0


def _process_cpu() -> float:
    """User+sys CPU seconds of this process, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Timer:
    """One process's CPU seconds per phase, nested phases counted once (in the innermost)."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.cpu: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.compile_requests = 0
        self.cache_hits = 0
        self.compile_wall: collections.Counter[str] = collections.Counter()
        self.stack: list[_Frame] = []
        self.scopes: list[str] = []  # the prefixes of the phases inside a scope ("trigger search: inputs")
        self.cpu[STARTUP] = _process_cpu()
        self.calls[STARTUP] = 1

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        frame = _Frame(name=name, cpu=_process_cpu(), compiles=self.compile_requests)
        self.stack.append(frame)
        try:
            yield
        finally:
            self.stack.pop()
            spent = _process_cpu() - frame.cpu
            compiles = self.compile_requests - frame.compiles
            own = "".join(self.scopes) + name + (COMPILE_SUFFIX if compiles > frame.child_compiles else "")
            self.cpu[own] += spent - frame.child_cpu
            self.calls[own] += 1
            if self.stack:
                self.stack[-1].child_cpu += spent
                self.stack[-1].child_compiles += compiles

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        prefix = f"{name}: "
        with self.phase(name):
            inside = prefix not in self.scopes  # a scope inside itself is named once
            if inside:
                self.scopes.append(prefix)
            try:
                yield
            finally:
                if inside:
                    self.scopes.pop()

    def innermost(self) -> str | None:
        """The phase now running, inside its scopes ("probes: kernel calls"); None outside every phase."""
        if not self.stack:
            return None
        inner = self.stack[-1].name
        return "".join(self.scopes) + inner

    def on_event(self, event: str, *args: Any, **__: Any) -> None:
        if event in COMPILE_STEPS and args:
            self.compile_wall[COMPILE_STEPS[event]] += args[0]
        if event == COMPILE_EVENT:
            self.compile_requests += 1
        elif event == CACHE_HIT_EVENT:
            self.cache_hits += 1

    def to_json(self) -> dict[str, Any]:
        """Plain data: the phases, the process's whole CPU, its compile requests and cache hits."""
        total = _process_cpu()
        return {
            "role": self.role,
            "pid": os.getpid(),
            "cpu_s": total,
            "phases": {k: {"cpu_s": round(v, 4), "calls": self.calls[k]} for k, v in sorted(self.cpu.items())},
            "unphased_cpu_s": round(total - sum(self.cpu.values()), 4),
            "compile_requests": self.compile_requests,
            "cache_hits": self.cache_hits,
            "compile_wall_s": {k: round(v, 3) for k, v in sorted(self.compile_wall.items())},
        }

    def write(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        name = self.role.replace("/", "+")  # a worker's role names its scope: probes/kernel-calls
        path = os.path.join(directory, f"phases-{name}-{os.getpid()}.json")
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1, sort_keys=True)


_timer: Timer | None = None


def start(role: str) -> Timer | None:
    """Time this process's phases when $ATTN_HARNESS_PHASES is set (once per process); written at exit."""
    global _timer
    directory = os.environ.get(PHASES_ENV)
    if not directory or _timer is not None:
        return _timer
    _timer = Timer(role)
    from jax import monitoring

    monitoring.register_event_listener(_timer.on_event)
    monitoring.register_event_duration_secs_listener(_timer.on_event)
    atexit.register(_timer.write, directory)
    return _timer


def phase(name: str) -> contextlib.AbstractContextManager[None]:
    """The phase `name` timed, or nothing when no timer was started."""
    return _timer.phase(name) if _timer is not None else contextlib.nullcontext()


def scope(name: str) -> contextlib.AbstractContextManager[None]:
    """The phases inside named "<name>: <phase>" (a trigger search's own inputs, kernel calls, ...)."""
    return _timer.scope(name) if _timer is not None else contextlib.nullcontext()


def child_env() -> dict[str, str]:
    """What a worker started now needs in its environment to be named after the phase that started it."""
    where = _timer.innermost() if _timer is not None else None
    return {ROLE_ENV: where.replace(": ", "/").replace(" ", "-")} if where else {}


def timed(name: str, fn: Callable[..., Any], *, scoped: bool = False) -> Callable[..., Any]:
    """`fn`, each of its calls timed as the phase `name` (scoped: a scope) when a timer was started."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with scope(name) if scoped else phase(name):
            return fn(*args, **kwargs)

    return wrapper
