"""The `jax_reference` oracle: the core reference computation (harness.reference) as an implementation."""

from __future__ import annotations

from harness.case import Case
from harness.contract import DENSE_ORACLE, Conventions, Implementation, Outputs, register
from harness.inputs import Inputs
from harness.reference import run_reference


class JaxReference(Implementation):
    name = "jax_reference"
    role = "oracle"
    framework = "jax"
    description = "pure-JAX softmax(QK^T*scale+bias)V on the dense mask, computed in the case dtype"
    capabilities = DENSE_ORACLE
    conventions = Conventions(
        bias="QK^T * scale + bias",
        causal="as the case declares (dense mask)",
        gqa="repeats k/v heads",
        empty_rows="zeros",
    )

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        return run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)


register(JaxReference())
