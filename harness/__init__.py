"""Differential and regression harness for attention kernels.

Pipeline: a Case (harness.core.case) is drawn (harness.core.strategies), run through a kernel and
the oracles (harness.running.runner), compared with a float64 truth (harness.core.compare), recorded
(harness.store) and reported. Kernels and oracles register through harness.core.contract.
"""

from harness.core import compat as _compat

# Before anything imports jax: keep JAX off a TPU plugin that has no TPU to find.
_compat.default_platforms_env()

from harness.core.case import Case, CaseError  # noqa: E402
from harness.core.compare import TOLERANCES, Comparison, Tolerance, compare  # noqa: E402
from harness.core.contract import (  # noqa: E402
    Capabilities,
    ContractError,
    Conventions,
    Implementation,
    Outputs,
    register,
    registry,
    resolve,
)
from harness.core.masks import Mask, Segments  # noqa: E402

__all__ = [
    "TOLERANCES",
    "Capabilities",
    "Case",
    "CaseError",
    "Comparison",
    "ContractError",
    "Conventions",
    "Implementation",
    "Mask",
    "Outputs",
    "Segments",
    "Tolerance",
    "compare",
    "register",
    "registry",
    "resolve",
]
