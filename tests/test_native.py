"""Native per-case measurements: taken only on an accelerator backend, recorded with the case.

This host has no accelerator, so the plumbing is proven by declaring the CPU backend native
for one test: jax_xla then runs natively on the CPU, which is a real native execution.
"""

from __future__ import annotations

import pytest

from harness.core import contract
from harness.core.case import Case
from harness.running.runner import run_case
from harness.store.files import subject_record
from harness.tpu import native

CASE = Case(batch=1, q_heads=2, kv_heads=1, q_len=64, kv_len=64, head_dim=32, seed=1)


def test_interpreted_and_cpu_backends_are_never_measured_natively() -> None:
    assert native.NATIVE_BACKENDS == ("tpu", "gpu")
    assert not native.measured(contract.registry()["pallas_flash"])  # tpu_interpret on this host
    assert not native.measured(contract.registry()["jax_xla"])  # cpu


def test_a_native_kernel_is_timed_per_case_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "NATIVE_BACKENDS", ("cpu",))
    xla, oracle = contract.registry()["jax_xla"], contract.registry()["torch_sdpa"]
    result = run_case(CASE, [xla, oracle], grads=True)
    kernel, sdpa = result.subjects
    assert kernel.passed and sdpa.passed
    timing = kernel.native
    assert timing is not None and sdpa.native is None  # an oracle is never measured: it runs on the CPU
    assert (timing["backend"], timing["device"], timing["pass"]) == ("cpu", "cpu:0", "fwd_bwd")
    assert len(timing["warm_s"]) == native.WARM_CALLS and all(t > 0 for t in timing["warm_s"])
    assert timing["median_s"] == sorted(timing["warm_s"])[native.WARM_CALLS // 2]
    assert timing["first_call_s"] > 0
    assert timing["peak_bytes"] is None  # the CPU backend reports no device memory
    record = subject_record(CASE, kernel, run_id="r").to_json()
    assert record["native"] == timing and record["device"] == "cpu:0"


def test_measure_needs_at_least_one_call() -> None:
    with pytest.raises(ValueError, match="calls=0 must be at least 1"):
        native.measure(contract.registry()["jax_xla"], CASE, grads=False, calls=0)
