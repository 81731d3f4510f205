"""The interpreter against the hardware: a Pallas TPU kernel run natively and interpreted, side by side.

The Pallas TPU interpreter models a kernel's semantics (its grid, DMAs, semaphores and
arithmetic in XLA on the CPU), not every unit's rounding on the chip. On a TPU host,
`run --cross-interpret` adds each TPU kernel's interpreted twin as a further subject of every
case: both are judged against the same float64 truth and tolerance, so a case where one
passes and the other fails (or both fail differently) is a finding about the interpreter or
the chip, recorded like any other result under the twin's name, "<kernel>@interpret".
"""

from __future__ import annotations

from harness.core.case import Case
from harness.core.contract import EmptyRows, Implementation, Outputs
from harness.core.inputs import Inputs
from harness.runtime import compat

SUFFIX = "@interpret"


class Interpreted(Implementation):
    """`native`, forced under the Pallas TPU interpreter even where a TPU is attached."""

    role = "kernel"

    def __init__(self, native: Implementation) -> None:
        self.native = native
        self.name = native.name + SUFFIX
        self.framework = native.framework
        self.capabilities = native.capabilities
        self.conventions = native.conventions
        self.description = f"{native.description or native.name}, under the Pallas TPU interpreter"

    def backend(self) -> str:
        return "tpu_interpret"

    def device(self) -> str:
        return self.native.device()

    def interpreters(self) -> tuple[str, ...]:
        # The interpreter that models the chip (DMAs, semaphores, memory): the one to set beside it.
        return ("faithful",)

    def empty_rows(self, case: Case) -> EmptyRows:
        return self.native.empty_rows(case)

    def padded_rows(self, case: Case) -> EmptyRows:
        return self.native.padded_rows(case)

    def violations(self, case: Case) -> list[str]:
        return self.native.violations(case)

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        with compat.forced_interpret():
            return self.native.run(case, inputs, grads=grads)


def twins(kernels: list[Implementation]) -> list[Implementation]:
    """The interpreted twin of every kernel that runs natively on a TPU here."""
    return [Interpreted(k) for k in kernels if k.backend() == "tpu"]
