"""The interpreter-against-hardware check: twins are interpreted even where a TPU is attached."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.core import contract
from harness.core.case import Case
from harness.running.runner import run_case
from harness.runtime import compat, devices
from harness.tpu import crosscheck
from kernels.pallas_flash import uniform_blocks

CASE = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, blocks=uniform_blocks(), seed=2)


def test_no_twins_where_the_kernel_is_already_interpreted() -> None:
    assert crosscheck.twins([contract.registry()["pallas_flash"]]) == []


def test_cross_interpret_off_a_tpu_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--cross-interpret", "--examples", "1"]) == 2
    assert "--cross-interpret needs a kernel running natively on a TPU" in capsys.readouterr().err


def test_a_twin_runs_under_the_interpreter_even_on_a_tpu_host(monkeypatch: pytest.MonkeyPatch) -> None:
    flash = contract.registry()["pallas_flash"]
    monkeypatch.setattr(devices, "has_tpu", lambda: True)  # as on a TPU host
    (twin,) = crosscheck.twins([flash])
    assert (twin.name, twin.backend(), flash.backend()) == ("pallas_flash@interpret", "tpu_interpret", "tpu")
    backends = []
    with compat.forced_interpret(), compat.tpu_kernel_context() as backend:
        backends.append(backend)
    with compat.tpu_kernel_context() as backend:  # the force ends with its block
        backends.append(backend)
    assert backends == ["tpu_interpret", "tpu"]
    # On this CPU host the native kernel cannot run; the twin must, and agree with the truth.
    (result,) = run_case(CASE, [twin], grads=False).subjects
    assert result.passed, result.failure
    assert (result.implementation, result.backend) == ("pallas_flash@interpret", "tpu_interpret")
