"""The exactness probe: which quantities the installed upstream kernel keeps to the bit, measured.

Per quantity it returns (out, lse where it saves residuals, dq, dk, dv, dbias on a biased case), on a few
fixed small cases, it measures whether a rerun returns the same bits (fresh inputs, the same worker, as
harness.running.determinism reruns) and whether batch row ROW computed alone returns what it returned
in the batch (harness.running.batch). Kernel code runs in a worker process of its own, as every probe
does (harness.running.probes). The answer is kept on disk (harness.runtime.caches.probe_cache_dir) per
library releases and adapter source, so a run pays for it once per installation.

`refined` applies it to a run's kernels (harness.core.exactness.refine): each kernel, and each drop-in
for a built-in (`KERNEL=MODULE:ATTR`), is checked under its upstream adapter's declaration as upstream's
own behaviour tightens it.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import resource
from collections.abc import Callable

from harness.core import contract
from harness.core.case import Case
from harness.core.contract import QUANTITIES, Implementation
from harness.core.exactness import Measured, refine
from harness.running import worker
from harness.running.batch import BATCH_INVARIANT, ROW_QUANTITIES
from harness.running.determinism import REPRODUCIBLE, difference
from harness.running.execute import Execution
from harness.runtime import caches, versions
from harness.runtime.compat import InterpretOptions

# Bump when the cases or what is measured change: every kept answer is then stale.
PROBE_VERSION = 1
# The first candidate inside a kernel's contract is probed, plain (with residuals where it saves them)
# and with a bias where it takes one: the smallest any kernel here takes (the probe's cost is mostly
# compiling), then the case on which pallas_flash's dq and dk move by an ulp with the batch
# (docs/findings/pallas_flash_dq_batch_dependent.md), for kernels that tile by 128. No mask: every row sees a key.
CANDIDATES = (
    Case(batch=2, q_heads=2, kv_heads=1, q_len=16, kv_len=16, head_dim=32, seed=5),
    Case(batch=2, q_heads=2, kv_heads=1, q_len=128, kv_len=128, head_dim=64, seed=5),
)
ROW = 1  # the batch row computed alone: the finding's
_MEASURED: dict[str, Measured] = {}  # this process's answers, by cache key


def upstream_of(impl: Implementation) -> Implementation | None:
    """The built-in adapter whose behaviour `impl` is held to: the one it drops into, itself where it is a
    built-in kernel; None for an oracle or a kernel of its own (its declaration stands)."""
    if impl.role != "kernel":
        return None
    if impl.drops_into is not None:
        return contract.resolve(impl.drops_into)
    if ":" in impl.name:
        return None
    try:
        builtin = contract.resolve(impl.name)
    except contract.UnknownImplementation:
        return None
    return builtin if builtin is (impl.original or impl) else None


def cases(impl: Implementation) -> list[Case]:
    """The probe's cases for `impl`: the first candidate inside its contract, and that case with a bias."""
    base = next((c for c in CANDIDATES if not impl.violations(c)), None)
    if base is None:
        return []
    biased = base.replace(bias=True, seed=base.seed + 1)
    return [base.replace(residuals=impl.capabilities.residuals)] + ([] if impl.violations(biased) else [biased])


def _diffs(first: Execution, again: Execution, alone: Execution) -> dict[str, dict[str, float]]:
    got, rerun, row = first.outputs, again.outputs, alone.outputs
    present = [q for q in QUANTITIES if got.get(q) is not None]
    return {
        REPRODUCIBLE: {q: difference(got.get(q), rerun.get(q)) for q in present},
        BATCH_INVARIANT: {q: difference(got.get(q)[ROW : ROW + 1], row.get(q)) for q in present if q in ROW_QUANTITIES},
    }


def _measure_cases(impl: Implementation, chosen: list[Case], options: InterpretOptions, own: worker.Worker):
    """Per check and quantity, the largest difference over `chosen`; or the first error (then no diffs)."""
    worst: dict[str, dict[str, float]] = {}
    for case in chosen:
        kw = {"grads": impl.capabilities.grads, "time_limit": worker.default_time_limit(), "interpret": options}
        first, again, alone = (worker.execute(impl, case, worker=own, row=r, **kw) for r in (None, None, ROW))
        failed = next((ex for ex in (first, again, alone) if ex.outputs is None), None)
        if failed is not None:
            return {}, f"{failed.error} (on {case})"
        for check, per in _diffs(first, again, alone).items():
            for q, d in per.items():
                worst.setdefault(check, {})[q] = max(d, worst.get(check, {}).get(q, 0.0))
    return worst, None


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(impl: Implementation, interpreter: str | None) -> Measured:
    """Probe `impl` under `interpreter` (None: natively), in a worker process of its own."""
    where = f"jax {versions.library_versions()['jax']}, " + (f"{interpreter} interpreter" if interpreter else "native")
    chosen = cases(impl)
    if not chosen:
        return Measured(kernel=impl.name, where=where, error=f"no probe case inside its contract: {CANDIDATES}")
    before = _children_cpu()
    own = worker.Worker()
    try:
        diffs, error = _measure_cases(impl, chosen, InterpretOptions(interpreter=interpreter or "fast"), own)
    finally:
        own.close()  # reaped, so its CPU time is counted among this process's children
    seconds = round(_children_cpu() - before, 2)
    return Measured(kernel=impl.name, where=where, cases=len(chosen), diffs=diffs, error=error, seconds=seconds)


def _key(impl: Implementation, interpreter: str | None) -> str:
    """What the answer depends on: the probe, the kernel, its interpreter, the releases and the adapter's source."""
    try:
        source = inspect.getsource(inspect.getmodule(type(impl)))
    except (OSError, TypeError):
        source = ""  # no file to read: the releases and the name alone
    parts = [PROBE_VERSION, impl.name, interpreter, versions.library_versions(), source]
    parts.append([c.to_json() for c in cases(impl)])
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def probed(impl: Implementation) -> Measured:
    """`measure` of `impl` under the first interpreter it runs under here, kept on disk (an answer with an
    error is not kept: a lost worker may not be lost next time)."""
    interpreter = next(iter(impl.interpreters()), None)
    key = _key(impl, interpreter)
    folder = caches.probe_cache_dir()
    path = None if folder is None else os.path.join(folder, f"exactness-{impl.name}-{key}.json")
    if key not in _MEASURED and path is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            with open(path) as f:
                _MEASURED[key] = Measured.from_json(json.load(f))
    if key not in _MEASURED:
        _MEASURED[key] = got = measure(impl, interpreter)
        if path is not None and got.error is None:
            with contextlib.suppress(OSError):
                os.makedirs(folder, exist_ok=True)
                with open(path, "w") as f:
                    json.dump(got.to_json(), f, indent=1)
    return _MEASURED[key]


def refined(kernels: list[Implementation], say: Callable[[str], None]) -> list[Implementation]:
    """`kernels` under their upstream's declaration refined by the probe; each contradiction said."""
    out = []
    for kernel in kernels:
        upstream = upstream_of(kernel)
        if upstream is None or upstream.cannot_run() is not None:
            out.append(kernel)
            continue
        got = refine(upstream.conventions, probed(upstream))
        for line in got.contradictions:
            say(f"{kernel.name}: {line}")
        out.append(kernel.with_conventions(got.conventions))
    return out
