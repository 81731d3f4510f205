"""What the Pallas kernel adapters (kernels/pallas_*.py) share, so that each stays one small file.

A Pallas kernel runs natively on its platform and otherwise as the same kernel code under an
interpreter: `TpuKernel` (the Pallas TPU interpreter, set up around the call by
harness.runtime.interpret.tpu_kernel_context) or `GpuKernel` (Triton on a GPU, `interpret=True` elsewhere).
Either keeps the function under test (upstream's, or a drop-in with its signature), names the
backend a result was computed on, and computes the outputs (the logsumexp from a forward call of
its own) on the kernel device. Beside them: lane-aligned tiles and the block-name check every
tiled adapter makes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from harness.core import probes
from harness.core.case import Case
from harness.core.contract import Implementation, Outputs
from harness.core.inputs import Inputs
from harness.core.jaxvjp import jax_outputs
from harness.runtime import devices, interpret, placement

# The TPU's vector lanes: Pallas TPU kernels tile key (and most query) axes in whole multiples of them
# (flash_attention.MIN_BLOCK_SIZE, splash_attention_kernel.NUM_LANES).
LANES = 128


def lane_tiles(length: int) -> list[int]:
    """Lane-aligned tile sizes dividing `length`, smallest first (so shrinking prefers many tiles)."""
    return [t for t in range(LANES, length + 1, LANES) if length % t == 0]


def divisors(n: int) -> list[int]:
    """Every positive divisor of n, smallest first."""
    return [d for d in range(1, n + 1) if n % d == 0]


def block_names(blocks: Collection[str], *, need: Iterable[str], may: Iterable[str] = (), note: str = "") -> str | None:
    """Why the case's block names are not every `need`ed one (plus any of `may`), or None when they are.

    note: what the caller adds to the message (how the names depend on each other)."""
    need, allowed = set(need), set(need) | set(may)
    missing, unknown = need - set(blocks), set(blocks) - allowed
    if not missing and not unknown:
        return None
    optional = f" and may add {sorted(allowed - need)}" if allowed - need else ""
    note = f" ({note})" if note else ""
    return f"blocks must name {sorted(need)}{optional}{note}; missing {sorted(missing)}, unknown {sorted(unknown)}"


class PallasKernel(Implementation):
    """A Pallas kernel adapter: the function under test, its description, and where it runs."""

    role = "kernel"
    framework = "jax"
    # What the upstream kernel is, in words ("Pallas TPU flash attention"); a drop-in adds its name.
    title: ClassVar[str]

    def __init__(self, fn: Callable[..., Any] | None, name: str, *, upstream: Callable[..., Any] | None = None) -> None:
        """fn: a drop-in with the upstream signature, or None for `upstream` (None too where the adapter
        picks among several upstream entry points per case)."""
        self.fn = upstream if fn is None else fn
        self.name = name
        self.description = self.title + ("" if fn is None or fn is upstream else f" drop-in {name}")

    @staticmethod
    def native() -> bool:
        """Whether this host has the kernel's own platform (else it runs under an interpreter)."""
        raise NotImplementedError

    def _context(self) -> AbstractContextManager[Any]:
        """What the kernel call runs inside (the interpreter's set-up off the platform)."""
        return contextlib.nullcontext()

    def outputs(
        self,
        f: Callable[..., Any],
        inputs: Inputs,
        *,
        grads: bool,
        lse: Callable[[], Callable[..., Any]] | None = None,
    ) -> Outputs:
        """f's output (and gradients) on the kernel device; `lse` builds a forward function returning the
        logsumexp, called separately (a residual-saving forward has no VJP of its own)."""
        device = placement.kernel_device()
        with self._context():
            got = jax_outputs(f, inputs, grads=grads, device=device)
            if lse is not None:
                got = dataclasses.replace(got, lse=jax_outputs(lse(), inputs, grads=False, device=device).out)
        return got


class TpuKernel(PallasKernel):
    """A Pallas TPU kernel: native on a TPU, else the same kernel code under a Pallas interpreter
    (harness.runtime.interpret.INTERPRETERS: "fast" or "faithful", as InterpretOptions.interpreter says)."""

    # A small case inside the adapter's contract (a forward and, where it has one, a backward pass):
    # what `interpreters` probes the kernel on. Adapters whose contract excludes it set their own.
    probe_case: ClassVar[Case] = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=128)
    # The HLO interpreter's refusal of this kernel, declared with its source (a finding's name): the kernel
    # then runs on the faithful interpreter alone. Undeclared, a refusal on probe_case where the faithful
    # interpreter runs the kernel is the kernel's own error under one interpreter (harness.core.verdicts):
    # `run` checks probe_case under the fast interpreter as a case, and reports its failure.
    fast_gap: ClassVar[str | None] = None

    @staticmethod
    def native() -> bool:
        return devices.has_tpu()

    def interpreters(self) -> tuple[str, ...]:
        """ "faithful" where this jax has the TPU interpret mode and cannot_run() finds no failure under it;
        "fast" when the kernel runs probe_case under the HLO interpreter without raising (probed once per
        function). Empty on a TPU host, where the kernel runs natively."""
        if self.native():
            return ()
        faithful = () if interpret.faithful_interpreter() or self.cannot_run() else ("faithful",)
        return (("fast",) if _runs_fast(self) is None else ()) + faithful

    def cannot_run(self) -> str | None:
        """Why no Pallas interpreter runs the kernel here, None when one does: the adapter calls an API this
        jax lacks (seen on probe_case), or this jax lacks the TPU interpret mode and the HLO interpreter
        refuses probe_case (each reason given). A gap of the harness's or the release's, recorded as
        "cannot run here", never as the kernel's failure."""
        if self.native():
            return None
        fast = _runs_fast(self)
        gap = _API_GAPS.get((type(self), self.fn))
        if gap is not None:
            return f"the adapter calls an API this jax lacks: {gap}"
        missing = interpret.faithful_interpreter()
        return None if missing is None or fast is None else f"{missing}; under the HLO interpreter: {fast}"

    def fast_refusal(self) -> str | None:
        """The HLO interpreter's error on probe_case, or None when the kernel runs under it."""
        return None if self.native() else _runs_fast(self)

    def backend(self) -> str:
        return "tpu" if self.native() else "tpu_interpret"

    def _context(self) -> AbstractContextManager[Any]:
        return interpret.tpu_kernel_context()


_FAST_PROBES: dict[tuple[type, Any], str | None] = {}
# Per adapter class and function: the probe's error where it says this jax lacks an API the adapter calls.
_API_GAPS: dict[tuple[type, Any], str] = {}


def _runs_fast(kernel: TpuKernel) -> str | None:
    """The HLO interpreter's error on kernel.probe_case (one line), or None when it runs; once per
    adapter class and function under test."""
    key = (type(kernel), kernel.fn)
    if key not in _FAST_PROBES:
        _FAST_PROBES[key] = _probe_fast(kernel)
    return _FAST_PROBES[key]


def _probe_fast(kernel: TpuKernel) -> str | None:
    reason = interpret.hlo_interpreter()
    if reason is not None:
        return reason
    case = kernel.probe_case
    problems = kernel.violations(case)
    if problems:
        raise ValueError(f"{kernel.name}: probe_case is outside its contract ({'; '.join(problems)}); set probe_case")
    # In a worker process under the CLI (harness.core.probes): a kernel that crashes or exits on the
    # probe is lost there, and runs on for the search to report, never refused as the interpreter's gap.
    probe = probes.call(kernel, case, grads=kernel.capabilities.grads, interpreter="fast")
    if probe.api_gap is not None:
        _API_GAPS[(type(kernel), kernel.fn)] = probe.api_gap
    return probe.refusal


class GpuKernel(PallasKernel):
    """A Pallas GPU kernel: Triton on a GPU, else the same kernel code with `interpret=True` on the CPU."""

    @staticmethod
    def native() -> bool:
        return devices.jax_platform() == "gpu"

    def backend(self) -> str:
        return "gpu" if self.native() else "gpu_interpret"

    def cannot_run(self) -> str | None:
        """Why the adapter cannot call the kernel in this release: an API it needs that this jax lacks, seen on
        the smallest case of its contract (forward only, once per adapter class and function); None when it
        can. Any other error on that case is left to the search to find and shrink."""
        key = (type(self), self.fn)
        if key not in _API_GAPS and key not in _GPU_PROBED:
            _GPU_PROBED.add(key)
            gap = _probe_api(self)
            if gap is not None:
                _API_GAPS[key] = gap
        gap = _API_GAPS.get(key)
        return None if gap is None else f"the adapter calls an API this jax lacks: {gap}"


_GPU_PROBED: set[tuple[type, Any]] = set()


def _probe_api(kernel: PallasKernel) -> str | None:
    """versions.missing_api of the error `kernel` raises on the smallest case of its contract, forward only."""
    from hypothesis import HealthCheck, find, settings

    from harness.core.strategies import cases

    quiet = settings(database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    case = find(cases(kernel), lambda _: True, settings=quiet)
    return probes.call(kernel, case, grads=False).api_gap
