"""torch_sdpa's float32 output is held to a factor measured for it, and kernels keep the standard rule."""

from __future__ import annotations

import pytest

from harness.core.case import Case
from harness.core.compare import IMPLEMENTATION_FACTORS, TOLERANCES, tolerance
from harness.core.contract import resolve
from harness.running.runner import run_case

# The case from issue 9: torch's float32 GEMM rounds the large logits differently from XLA's
# (error 5.48e-05 against a standard bound of 3.99e-05): an oracle false alarm.
ISSUE_CASE = Case(
    batch=1, q_heads=1, kv_heads=1, q_len=32, kv_len=16, head_dim=32, regime="large", scale=1.0, seed=3963
)


def test_torch_sdpa_agrees_on_the_case_that_raised_a_false_alarm():
    (torch,) = run_case(ISSUE_CASE, [resolve("torch_sdpa")], grads=False).subjects
    (out,) = [c for c in torch.comparisons if c.quantity == "out"]
    factor, standard = IMPLEMENTATION_FACTORS[("torch_sdpa", "float32", "out")], TOLERANCES[("float32", "out")].factor
    assert torch.passed
    standard_bound = out.bound - (factor - standard) * out.oracle_abs
    if out.max_abs <= standard_bound:
        # jax 0.12.1 with torch 2.15.0 (and torch 2.13.0 on a host without AVX-512): XLA's float32 rounds these
        # logits as torch does, the plain oracle's own error equals torch's, and no factor is needed here.
        pytest.skip(
            f"no false alarm here: torch's error {out.max_abs:.3g} is within the standard bound {standard_bound:.3g}"
            f" (torch {torch_version()}, CPU capability {cpu_capability()})"
        )
    assert out.max_abs > standard_bound  # past the standard bound: the factor is what passes it


def test_only_the_declared_oracle_quantity_gets_another_factor():
    assert set(IMPLEMENTATION_FACTORS) == {("torch_sdpa", "float32", "out")}
    for kernel in ("pallas_flash", "pallas_splash", "xla_attention", None):
        assert tolerance("float32", "out", kernel) == TOLERANCES[("float32", "out")]
    assert tolerance("bfloat16", "out", "torch_sdpa") == TOLERANCES[("bfloat16", "out")]
    assert tolerance("float32", "dq", "torch_sdpa") == TOLERANCES[("float32", "dq")]


def torch_version() -> str:
    import torch

    return torch.__version__


def cpu_capability() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()
