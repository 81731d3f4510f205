"""Cheap stand-in kernels for the harness's own tests: the reference attention, optionally broken.

Each is a module attribute whose name is its MODULE:ATTR spec, so a failure file,
`repro` and the time-limit worker can all resolve it. They run in milliseconds, so
tests of search, shrinking and replay need no interpreted Pallas kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.core import reference
from harness.core.case import ORDINARY_REGIMES, Case
from harness.core.contract import Capabilities, Conventions, Implementation, Outputs
from harness.core.inputs import Inputs


class FakeKernel(Implementation):
    role = "kernel"
    framework = "jax"
    capabilities = Capabilities(
        dtypes=("float32",),
        head_dims=(32, 64),
        # Few shapes: each new shape compiles the reference's ops (~1 s), a repeated one is free.
        seq_lens=(16, 32),
        mask_components=frozenset({"causal_top_left", "bias"}),
        max_batch=1,
        max_kv_heads=1,
        max_group=1,
        # The ordinary value regimes: the search tests' seeds were chosen for those draws; the extreme
        # regimes have their own tests (tests/test_inputs.py, test_determinism.py, test_batch.py).
        regimes=ORDINARY_REGIMES,
    )
    conventions = Conventions(bias="QK^T * scale + bias", causal="top-left", gqa="repeats", empty_rows="zeros")

    def __init__(
        self,
        name: str,
        *,
        broken: Callable[[Case], bool] = lambda case: False,
        effect: str = "scale",
        backend: str = "cpu",
    ) -> None:
        self.name = name
        self.broken = broken
        self.effect = effect
        self._backend = backend
        self.calls: list[Case] = []

    def backend(self) -> str:
        return self._backend

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        self.calls.append(case)
        got = reference.run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)
        if not self.broken(case):
            return got
        if self.effect == "raise":
            raise RuntimeError(f"planted failure on {case}")
        if self.effect == "interrupt_in_exec":
            # A Ctrl-C whose KeyboardInterrupt is raised inside exec() of a string, as one can land
            # in code that dataclasses, typing or Hypothesis build that way.
            exec("raise KeyboardInterrupt('Ctrl-C inside exec of a string')")  # noqa: S102
        if self.effect == "nan":
            got.out = np.where(np.arange(got.out.size).reshape(got.out.shape) == 0, np.nan, got.out)
            return got
        got.out = got.out * 1.01
        return got


class TwoBugs(FakeKernel):
    """BROKEN's bug (wrong values), and causal masks at head_dim 32 raise: two distinct failures."""

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        if case.head_dim == 32 and case.mask.causal is not None:
            raise ValueError(f"planted causal failure on {case}")
        return super().run(case, inputs, grads=grads)


CORRECT = FakeKernel("tests._fakes:CORRECT")
# Fails on head_dim 64 with at least 32 keys: the smallest failing case is easy to name.
BROKEN = FakeKernel("tests._fakes:BROKEN", broken=lambda c: c.head_dim == 64 and c.kv_len >= 32)
RAISES = FakeKernel("tests._fakes:RAISES", broken=lambda c: True, effect="raise", backend="tpu_interpret")
NAN = FakeKernel("tests._fakes:NAN", broken=lambda c: True, effect="nan")
TWO_BUGS = TwoBugs("tests._fakes:TWO_BUGS", broken=lambda c: c.head_dim == 64 and c.kv_len >= 32)
INTERRUPTED_IN_EXEC = FakeKernel("tests._fakes:INTERRUPTED_IN_EXEC", broken=lambda c: True, effect="interrupt_in_exec")


def small_case(**changes) -> Case:
    base = dict(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=32, head_dim=64)
    return Case(**{**base, **changes})


def broken_minimal() -> Case:
    """BROKEN's minimal failing case as a search reports it: Hypothesis shrinks to head_dim 64 with 32 keys and
    16 queries (small_case), then the trigger search leaves the unequal lengths out by growing the queries to
    the keys' 32 (harness.running.signatures.without): the bug needs neither, its trigger is the plainest case."""
    return small_case(q_len=32)
