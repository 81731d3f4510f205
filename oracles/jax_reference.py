"""The `jax_reference` oracle: the core reference computation (harness.core.reference) as an implementation."""

from __future__ import annotations

import dataclasses

from harness.core import coverage as cov
from harness.core import extended
from harness.core.case import Case
from harness.core.contract import DENSE_ORACLE, About, Conventions, Implementation, Outputs, register
from harness.core.inputs import Inputs
from harness.core.reference import attention, run_reference

API = (
    cov.Api(
        name="harness.core.reference.attention",
        locate=lambda: attention,
        params=(
            cov.Param(name="q", drawn="[B, N, T, H] in the case dtype (float64 for the truth)", exercised=cov.always),
            cov.Param(name="k", drawn="[B, K, S, H]", exercised=cov.always),
            cov.Param(name="v", drawn="[B, K, S, H]", exercised=cov.always),
            cov.Param(name="bias", drawn="float [B, N, T, S], or None", exercised=cov.has_bias),
            cov.Param(
                name="visible",
                drawn="the dense mask of every component (harness.core.masks.dense_mask)",
                exercised=lambda case: bool(case.mask.components),
            ),
            cov.Param(name="scale", drawn="1/sqrt(H), 1.0, 0.25, 0.03", exercised=cov.explicit_scale),
            cov.Param(name="soft_cap", drawn="None or a cap (strategies.SOFT_CAPS)", exercised=cov.soft_cap),
            cov.Param(
                name="sinks",
                drawn="None or one logit per query head; their gradient dsinks checked",
                exercised=cov.sinks,
            ),
        ),
    ),
)


class JaxReference(Implementation):
    name = "jax_reference"
    role = "oracle"
    framework = "jax"
    description = "pure-JAX softmax(cap(QK^T*scale+bias))V with sinks, on the dense mask, in the case dtype"
    about = About(
        summary="the oracle and same-dtype ruler: " + description, source="oracles/jax_reference.py (this repository)"
    )
    capabilities = dataclasses.replace(
        DENSE_ORACLE,
        dtypes=extended.with_float64(DENSE_ORACLE.dtypes),
        soft_cap=True,
        sinks=True,
        residuals=True,
    )
    conventions = Conventions(
        bias="QK^T * scale + bias",
        causal="as the case declares (dense mask)",
        gqa="repeats k/v heads",
        empty_rows="zeros",
    )
    api = API

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        return run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)


register(JaxReference())
