"""Mask strategies: every drawn case lies inside its kernel's contract (no kernel runs), and
every mask component a kernel declares is drawn, and only those."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import contract, strategies
from harness.core.case import Case
from harness.core.masks import MASK_COMPONENTS, Mask
from tests import _removed

KERNELS = [
    "pallas_splash",
    pytest.param("pallas_gpu", marks=_removed.needs(_removed.GPU_ATTENTION)),
    "jax_xla",
    "pallas_flash",
]
DRAWS = 150


def _draw_all(impl: contract.Implementation) -> list[Case]:
    drawn: list[Case] = []

    @settings(
        max_examples=DRAWS, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(strategies.cases(impl))
    def collect(case: Case) -> None:
        drawn.append(case)

    collect()
    return drawn


@pytest.fixture(scope="module", params=KERNELS)
def drawn(request: pytest.FixtureRequest) -> tuple[contract.Implementation, list[Case]]:
    impl = contract.resolve(request.param)
    return impl, _draw_all(impl)


@pytest.mark.no_mutation
def test_every_drawn_case_is_inside_the_contract(drawn) -> None:
    impl, cases = drawn
    for case in cases:
        assert impl.violations(case) == [], str(case)
        assert Case.from_json(case.to_json()) == case


@pytest.mark.no_mutation
def test_every_declared_mask_component_is_drawn_and_no_other(drawn) -> None:
    impl, cases = drawn
    declared = impl.capabilities.mask_components & (MASK_COMPONENTS | {"bias"})
    seen = set().union(*(c.mask.components | ({"bias"} if c.bias else set()) for c in cases))
    assert seen <= declared
    assert declared - seen == set(), f"{impl.name}: never drew {sorted(declared - seen)} in {DRAWS} cases"


@pytest.mark.no_mutation
@_removed.needs(_removed.GPU_ATTENTION)
def test_pallas_gpu_draws_shared_segments_and_causal_only_with_q_le_kv() -> None:
    impl = contract.resolve("pallas_gpu")
    for case in _draw_all(impl):
        segs = case.mask.segments
        assert segs is None or (segs.q == segs.kv and case.q_len == case.kv_len)
        assert not (case.mask.causal and case.q_len > case.kv_len)


@given(st.data())
@settings(max_examples=40, deadline=None, database=None)
def test_per_head_masks_have_one_mask_per_query_head(data: st.DataObject) -> None:
    heads = data.draw(st.integers(1, 4))
    mask = data.draw(
        strategies.masks(
            components=frozenset({"per_head", "window", "chunk"}), batch=1, q_len=128, kv_len=256, heads=heads
        )
    )
    assert isinstance(mask, Mask)
    if mask.heads is not None:
        assert len(mask.heads) == heads
        mask.validate(batch=1, heads=heads, q_len=128, kv_len=256)


@given(strategies.block_sparse(q_len=384, kv_len=256))
@settings(max_examples=30, deadline=None, database=None)
def test_block_sparse_patterns_cover_the_plane(pattern) -> None:
    pattern.validate(384, 256)
