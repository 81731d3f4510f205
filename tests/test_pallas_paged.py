"""The paged-attention adapter: its contract, a fixed run per layout path, and a planted page-table bug."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from harness.core import contract, paging
from harness.core.case import Case
from harness.core.compare import compare, tolerance
from harness.core.inputs import make_inputs
from harness.core.magnitudes import term_magnitudes
from harness.core.masks import Lengths, Mask
from harness.core.strategies import cases
from harness.running.runner import run_case
from harness.running.search import search

PAGED = contract.resolve("pallas_paged")
PLANTED = "pallas_paged=tests.planted.paged_page_table_off_by_one:paged_attention"
SOFT_CAP_BUG = "pallas_paged=tests.planted.paged_soft_cap_unscaled:paged_attention"
LAYOUT = {"page_size": 16, "pages_per_compute_block": 2, "spare_pages": 2}


def _case(**changes) -> Case:
    # Three sequences: empty, one past a page, full; GQA; int8 pages, the split sequence axis.
    base = Case(
        batch=3,
        q_heads=4,
        kv_heads=2,
        q_len=1,
        kv_len=64,
        head_dim=64,
        dtype="bfloat16",
        mask=Mask(lengths=Lengths(kv=(0, 17, 64))),
        blocks=LAYOUT,
        kv_format="int8",
    )
    return base.replace(**changes)


@settings(max_examples=150, deadline=None, database=None)
@given(cases(PAGED))
def test_every_drawn_case_is_inside_the_contract(case):
    assert PAGED.violations(case) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"blocks": {**LAYOUT, "pages_per_compute_block": 3}}, "must divide the 4 pages", id="per-block"),
        pytest.param({"blocks": {**LAYOUT, "megacore_batch": 1}}, "megacore_batch needs an even batch", id="mc"),
        pytest.param({"dtype": "float32", "kv_format": None}, "only with kv_format", id="float32-pages-round-to-bf16"),
        pytest.param({"q_len": 2}, "q_len=2 not in (1,)", id="one-query"),
        pytest.param({"blocks": {"page_size": 16}}, "blocks must name", id="layout"),
    ],
)
def test_violations_name_the_value(changes, message):
    assert any(message in v for v in PAGED.violations(_case(**changes))), PAGED.violations(_case(**changes))


def test_int8_pages_split_sequence_axis_and_empty_sequence_pass():
    result = run_case(_case(blocks={**LAYOUT, "split_seq_dim": 1}), [PAGED], grads=False)
    assert result.passed, result.subjects[0].failure
    empty = [c for c in result.subjects[0].comparisons if c.quantity == "out[empty]"]
    assert empty and "declared unwritten" in empty[0].note  # the length-0 sequence, as declared


def test_float32_with_int8_pages_is_held_to_float32_precision():
    result = run_case(_case(dtype="float32", mask=Mask(lengths=Lengths(kv=(5, 17, 64)))), [PAGED], grads=False)
    assert result.passed, result.subjects[0].failure
    # The kernel's own float32 error, far below bfloat16's (~2e-3 on these inputs).
    assert result.subjects[0].comparisons[0].max_abs < 1e-5


def _soft_capped(impl, case: Case, cap: float):
    """`impl` on `case` with a logits soft cap, against the truth gathered from the same pages."""
    inputs = make_inputs(case)
    layout = {"page_size": LAYOUT["page_size"], "spare_pages": LAYOUT["spare_pages"]}
    truth, ruler = paging.case_reference(case, inputs, **layout, cap=cap)
    got = impl.run(case, inputs, grads=False).out
    mag = term_magnitudes(case, inputs)["out"]
    return compare("out", got, truth, ruler, tolerance(case.dtype, "out"), magnitude=mag, rows=~inputs.empty)


def test_soft_cap_is_passed_natively_and_checked_against_the_gathered_truth():
    # Large logits, so a cap of 5 changes every row (the truth moves by ~3 between cap and no cap).
    case = _case(mask=Mask(lengths=Lengths(kv=(5, 17, 64))), regime="large").replace(soft_cap=5.0)
    assert _soft_capped(PAGED, case, 5.0).passed
    bug = _soft_capped(contract.resolve(SOFT_CAP_BUG), case, 5.0)
    assert not bug.passed and bug.max_abs > 10 * bug.bound


def test_planted_page_table_off_by_one_is_caught_on_a_fixed_case():
    planted = contract.resolve(PLANTED)
    # One page per compute block, 3 of 4 pages used: the shifted reads stay inside the table
    # (a read past its end is an out-of-bounds error under the interpreter: caught too).
    blocks = {**LAYOUT, "pages_per_compute_block": 1}
    case = _case(batch=1, mask=Mask(lengths=Lengths(kv=(33,))), kv_format=None, blocks=blocks)
    result = run_case(case, [planted], grads=False)
    assert not result.passed
    assert result.subjects[0].comparisons[0].max_abs > 10 * result.subjects[0].comparisons[0].bound


@pytest.mark.slow
def test_planted_page_table_off_by_one_shrinks_to_at_most_two_sequences():
    planted = contract.resolve(PLANTED)
    outcome = search(planted, [], profile="ci", grads=False)
    assert outcome.shrunk is not None, f"passed {len(outcome.results)} ci cases"
    assert outcome.shrunk.case.batch <= 2, outcome.shrunk.case


@pytest.mark.parametrize("mode", ["megacore_batch", "megacore_kv_head"])
def test_megacore_modes_run_on_two_simulated_cores_and_match_the_default_mode(mode):
    # Under the default one-core interpreter these calls wait forever
    # (docs/findings/pallas_paged_megacore_interpreter_hang.md); the adapter asks for two cores.
    case = _case(batch=2, mask=Mask(lengths=Lengths(kv=(20, 64))), kv_format=None)
    inputs = make_inputs(case)
    want = PAGED.run(case, inputs, grads=False).out
    got = PAGED.run(case.replace(blocks={**LAYOUT, mode: 1}), inputs, grads=False).out
    assert (got == want).all()
