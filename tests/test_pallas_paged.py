"""The paged-attention adapter: its contract, a fixed run per layout path, and a planted page-table bug."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from harness import contract
from harness.case import Case
from harness.masks import Lengths, Mask
from harness.runner import run_case
from harness.search import search
from harness.strategies import cases

PAGED = contract.resolve("pallas_paged")
PLANTED = "pallas_paged=tests.planted.paged_page_table_off_by_one:paged_attention"
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
        pytest.param({"blocks": {**LAYOUT, "megacore_batch": 1}}, "hangs under the Pallas TPU interpreter", id="mc"),
        pytest.param({"dtype": "float32"}, "dtype=float32", id="float32-pages-round-to-bf16"),
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
