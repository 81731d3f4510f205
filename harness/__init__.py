"""Differential and regression harness for attention kernels.

Pipeline: a Case (harness.core.case) is drawn (harness.core.strategies), run through a kernel and
the oracles (harness.running.runner), compared with a float64 truth (harness.core.compare), recorded
(harness.store) and reported. Kernels and oracles register through harness.core.contract.

Importing the package changes nothing in the process: JAX_PLATFORMS (kept off a TPU plugin that
has no TPU to find, harness.runtime.compat.default_platforms_env) is set where a process starts: the
CLI (harness.cli.main), the worker processes, tests/conftest.py and the nox sessions.
"""

from harness.core.case import Case, CaseError
from harness.core.compare import TOLERANCES, Comparison, Tolerance, compare
from harness.core.contract import (
    Capabilities,
    ContractError,
    Conventions,
    Implementation,
    Outputs,
    register,
    registry,
    resolve,
)
from harness.core.masks import Mask, Segments

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
