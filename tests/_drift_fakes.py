"""A stand-in kernel whose numerics change with its environment, for the paired-drift tests.

`KERNEL` computes the reference attention in the case dtype (its error is the same-dtype
oracle's). Where DOUBLE_ENV is set, as if another release were installed, its output error
against the float64 truth doubles on cases with head_dim 64: still within the tolerance
(2 x the oracle's error plus a floor), so only the paired drift check can see it.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from harness.core import reference
from harness.core.case import Case
from harness.core.contract import Outputs
from harness.core.inputs import Inputs
from tests._fakes import FakeKernel

DOUBLE_ENV = "ATTN_TEST_DOUBLE_OUT_ERROR"


def doubled(case: Case) -> bool:
    return bool(os.environ.get(DOUBLE_ENV)) and case.head_dim == 64


class DriftingKernel(FakeKernel):
    # The ordinary regimes only: test_drift's derandomized 6 cases must include the head_dim 64 the
    # planted change touches, as they did before the extreme-value regimes joined the draw.
    capabilities = dataclasses.replace(FakeKernel.capabilities, regimes=("normal", "large", "ties"))

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        got = super().run(case, inputs, grads=grads)
        if doubled(case):
            # The float64 reference, always the same program: reference.truth computes a shape's first
            # sighting in numpy and later ones in jax, and a kernel's rerun must get the same bits.
            truth = reference.run_reference(case, inputs, grads=False, dtype=np.float64).out
            got.out = truth + 2.0 * (got.out - truth)
        return got


KERNEL = DriftingKernel("tests._drift_fakes:KERNEL")
