"""Batch invariance (harness.running.batch): a row alone against the same row in the batch, and its control."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.core import contract
from harness.core.case import Case
from harness.core.contract import Outputs
from harness.core.inputs import make_inputs
from harness.core.masks import Lengths, Mask, Segments
from harness.core.rows import row_inputs, row_mask
from harness.running import batch
from harness.running.runner import run_case
from tests._fakes import FakeKernel, small_case
from tests.fixtures.faults import EXITS_ON_A_ROW_ALONE as EXITS

PLANTED = "jax_xla=tests.planted.xla_batch_ulp:dot_product_attention"
LIMIT_S = 120.0  # the per-case time limit of a run: the kernel in its worker process


def _checked_case() -> Case:
    """A batch of 3 with per-row lengths whose id the batch check samples (batch.wanted)."""
    base = Case(batch=3, q_heads=2, kv_heads=1, q_len=16, kv_len=16, head_dim=32)
    xla = contract.resolve("jax_xla")
    for seed in range(20):
        case = base.replace(seed=seed, mask=Mask(lengths=Lengths(q=(16, 9, 16), kv=(16, 16, 5))))
        if batch.wanted(xla, case, passed=True) and not xla.violations(case):
            return case
    raise AssertionError("no seed in 0..19 is sampled")


def test_a_row_alone_keeps_its_own_mask_and_arrays():
    mask = Mask(
        segments=Segments(q=(((0, 4),), ((0, 2), (1, 2))), kv=(((0, 4),), ((1, 4),))),
        lengths=Lengths(kv=(4, 3)),
    )
    case = Case(batch=2, q_heads=1, kv_heads=1, q_len=4, kv_len=4, head_dim=32, mask=mask)
    one = row_mask(mask, 1)
    assert one.segments.q == (((0, 2), (1, 2)),) and one.lengths.kv == (3,)
    inputs = make_inputs(case)
    alone = row_inputs(inputs, 1)
    assert alone.q.shape[0] == 1 and (alone.visible[0] == inputs.visible[1]).all()
    assert (make_inputs(case.replace(batch=1, mask=one)).visible[0] == inputs.visible[1]).all()


def test_declared_invariant_is_bitwise_and_otherwise_the_verdicts_bound():
    full = Outputs(out=np.ones((2, 1, 2, 2)))
    moved = Outputs(out=np.nextafter(np.ones((1, 1, 2, 2)), 2.0))
    rows = np.ones((1, 1, 2), bool)
    assert not batch.comparison(full, moved, 1, rows=rows, bounds=None).passed
    assert batch.comparison(full, moved, 1, rows=rows, bounds={"out": 1e-6}).passed
    # Rows that see no key keep whatever convention the kernel declares: not compared.
    assert batch.comparison(full, moved, 1, rows=~rows, bounds=None).passed


def test_an_ulp_that_follows_the_batch_size_fails_and_the_upstream_kernel_passes():
    case = _checked_case()
    planted, upstream = contract.resolve(PLANTED), contract.resolve("jax_xla")
    bad, good = run_case(case, [planted, upstream], grads=True).subjects
    assert [c.quantity for c in bad.comparisons if not c.passed] == [batch.BATCH_INVARIANT], bad.failure
    assert good.passed and batch.BATCH_INVARIANT in good.checks, good.failure


def test_a_row_alone_runs_in_the_worker_and_a_kernel_that_exits_there_fails_its_case():
    """Under a time limit (a run's default) the row alone runs where the kernel's case ran, in the worker:
    a kernel that exits its process on the row fails the case with how it died, and the harness lives."""
    case = small_case(batch=2, q_len=16, kv_len=16, head_dim=32)
    case = next(c for c in (case.replace(seed=s) for s in range(20)) if batch.wanted(EXITS, c, passed=True))
    (got,) = run_case(case, [EXITS], grads=False, time_limit=LIMIT_S).subjects
    assert not got.passed and [c.quantity for c in got.comparisons if not c.passed] == [batch.BATCH_INVARIANT]
    assert got.error.startswith("WorkerDied: ") and "exited with status 3" in got.error, got.error
    assert got.error.endswith(f"(batch row {batch.row(case)} alone)"), got.error


class _OutMovesWithTheBatch(FakeKernel):
    """Right within any tolerance, but its output moves by a few ulp with the batch size: what a fork of
    pallas_flash (which declares only dq and dk batch-dependent) must not be let off for."""

    def run(self, case, inputs, *, grads):  # noqa: ANN001, ANN201 - FakeKernel's
        got = super().run(case, inputs, grads=grads)
        got.out = got.out * (1 + case.batch * 2.0**-40)
        return got


@pytest.mark.parametrize(("varies", "passes"), [(("dq", "dk"), False), ((), True)], ids=["dq-dk-declared", "all"])
def test_only_the_quantities_declared_to_vary_with_the_batch_are_held_to_the_tolerance(varies, passes):
    kernel = _OutMovesWithTheBatch("tests.test_batch:out_moves")
    kernel.conventions = dataclasses.replace(
        FakeKernel.conventions, batch_invariant="dq and dk by an ulp", batch_varies=varies
    )
    case = small_case(batch=2, q_len=16, kv_len=16, head_dim=32)
    case = next(c for c in (case.replace(seed=s) for s in range(20)) if batch.wanted(kernel, c, passed=True))
    (got,) = run_case(case, [kernel], grads=False).subjects
    (row,) = [c for c in got.comparisons if c.quantity == batch.BATCH_INVARIANT]
    assert row.passed is passes and got.passed is passes, row.note


def test_batch_varies_names_quantities_and_needs_a_reason():
    with pytest.raises(ValueError, match="names \\['dx'\\]"):
        dataclasses.replace(FakeKernel.conventions, batch_invariant="why", batch_varies=("dx",))
    with pytest.raises(ValueError, match="needs batch_invariant to say why"):
        dataclasses.replace(FakeKernel.conventions, batch_varies=("dq",))
