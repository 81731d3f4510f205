"""Smoke cases: each declared mask component, tiling class and dtype early, smallest size first (harness.core.smoke)."""

from __future__ import annotations

from harness.core import contract, features, smoke
from harness.running.search import search
from tests import _fakes


def test_the_flash_smoke_set_covers_every_mask_tiling_and_dtype_in_four_small_cases():
    flash = contract.registry()["pallas_flash"]
    cases = smoke.smoke_cases(flash)
    assert len(cases) == 4
    seen = set().union(*(features.of(c, flash) for c in cases))
    for group in smoke.GROUPS:
        assert {f"{group}:{v}" for v in features.declared(flash)[group]} <= seen, group
    for case in cases:
        assert not flash.violations(case)
        assert case.batch == 1 and case.q_heads == 1 and max(case.q_len, case.kv_len) <= 256
    assert "mask:causal_top_left" in features.of(cases[0], flash)  # the commonest bugs first
    assert smoke.smoke_cases(flash) == cases  # the same every run


def test_a_search_starts_with_the_smoke_cases_and_counts_them_in_its_examples():
    kernel = _fakes.FakeKernel("tests._fakes:smoked")
    cases = smoke.smoke_cases(kernel)
    outcome = search(kernel, [], examples=len(cases) + 2, profile="ci", grads=False, smoke=True)
    assert [r.case for r in outcome.results[: len(cases)]] == cases
    assert len(outcome.results) <= len(cases) + 2 and outcome.passed
    only = search(kernel, [], examples=1, profile="ci", grads=False, smoke=True)
    assert [r.case for r in only.results] == cases[:1]


def test_a_failing_smoke_case_is_the_reported_failure():
    kernel = _fakes.FakeKernel("tests._fakes:causal_broken", broken=lambda c: c.mask.causal is not None)
    outcome = search(kernel, [], examples=10, profile="ci", grads=False, smoke=True)
    assert outcome.shrunk is not None and outcome.shrunk.case == smoke.smoke_cases(kernel)[0]
    assert outcome.shrunk.case.mask.causal == "top_left" and outcome.shrink_runs == 0
    without = search(kernel, [], examples=1, profile="ci", grads=False)
    assert without.results[0].case.mask.causal is None  # Hypothesis alone starts from no mask
