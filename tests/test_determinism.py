"""Run-to-run reproducibility (harness.running.determinism): the rerun's share, its comparison, and its control."""

from __future__ import annotations

import numpy as np
import pytest

from harness import cli
from harness.core import contract
from harness.core.case import Case
from harness.core.contract import Outputs
from harness.running import determinism
from harness.running.failures import write_failure
from harness.running.runner import Check, run_case
from tests.planted import spec

CASE = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, seed=3)


def test_the_same_bits_pass_nan_matching_nan_and_one_ulp_fails():
    a = np.array([[1.0, np.nan], [0.0, -2.0]])
    assert determinism.comparison(Outputs(out=a), Outputs(out=a.copy())).passed
    moved = a.copy()
    moved[1, 1] = np.nextafter(-2.0, 0.0)
    row = determinism.comparison(Outputs(out=a, dq=a), Outputs(out=a, dq=moved))
    assert not row.passed and row.bound == 0.0 and row.max_abs == pytest.approx(2.0**-52 * 2)
    assert "(dq)" in row.note
    raised = determinism.comparison(Outputs(out=a), "boom")
    assert not raised.passed and "raised" in raised.note


def test_every_case_is_rerun_except_a_share_on_the_faithful_interpreter():
    flash = contract.resolve("pallas_flash")
    ids = [CASE.replace(seed=s) for s in range(64)]
    faithful = [c for c in ids if determinism.wanted(flash, c, "faithful")]
    assert 0 < len(faithful) < len(ids) / 4  # one in FAITHFUL_ONE_IN, by case id
    assert all(determinism.wanted(flash, c, "fast") for c in ids)
    assert all(determinism.wanted(flash, c, "faithful", every=True) for c in ids)
    assert not determinism.wanted(contract.resolve("torch_sdpa"), CASE, None)  # an oracle is a judge


def test_an_ulp_on_every_other_call_fails_the_rerun_and_its_file_replays_it(tmp_path, capsys):
    planted, upstream = contract.resolve(spec("flash_rerun_ulp")), contract.resolve("pallas_flash")
    result = run_case(CASE, [planted, upstream], grads=False, policy="fast")
    bad, good = result.subjects
    failed = [c.quantity for c in bad.comparisons if not c.passed]
    assert failed == [determinism.REPRODUCIBLE], bad.failure  # within every tolerance: only the rerun sees it
    assert bad.interpreter == "faithful" and not bad.shadow.passed  # confirmed on the faithful interpreter
    assert good.passed and determinism.REPRODUCIBLE in good.checks, good.failure
    path = write_failure(tmp_path, result, Check(kernel=planted, grads=False))
    assert cli.main(["repro", str(path)]) == cli.EXIT_FAIL, capsys.readouterr().out
    assert cli.main(["repro", str(path), "--kernel", "pallas_flash"]) == cli.EXIT_OK, capsys.readouterr().out
