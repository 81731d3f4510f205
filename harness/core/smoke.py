"""Smoke cases: before random generation, every declared mask component, dtype and tiling class, at the smallest size.

Hypothesis starts from the simplest cases, so a bug in one mask component can spend a
run's first cases on cases without it. A run therefore starts with a few explicit cases:
the i-th asks for the i-th mask component, the i-th tiling class and the i-th dtype at
once (cycling through the shorter lists), so max(len) cases cover every one of them. Each
is the smallest case inside the kernel's contract that has those features, found by
Hypothesis's own `find` (derandomized: the same cases every run), never a hand-built case
that could drift out of the contract.
"""

from __future__ import annotations

import functools

import hypothesis
from hypothesis import HealthCheck, Phase, settings

from harness.core import features, strategies
from harness.core.case import Case
from harness.core.contract import Implementation

# The groups smoke cases cover (harness.core.features), in the order their values are paired.
GROUPS = ("mask", "tiling", "dtype")
# Enough draws to meet a combination drawn one time in a few hundred; finding and shrinking
# the smoke set of pallas_flash takes a few CPU seconds, once per process.
FIND_SETTINGS = settings(
    database=None,
    derandomize=True,
    max_examples=1000,
    deadline=None,
    phases=(Phase.generate, Phase.shrink),
    suppress_health_check=list(HealthCheck),
)


def _order(group: str, values: tuple[str, ...]) -> list[str]:
    # Causal masks first (the most common source of kernel bugs), "none" last: it is the
    # default every other feature is drawn with anyway.
    if group != "mask":
        return list(values)
    return sorted(values, key=lambda v: (v == "none", not v.startswith("causal"), v))


def _smallest(impl: Implementation, wanted: frozenset[str]) -> Case | None:
    try:
        return hypothesis.find(strategies.cases(impl), lambda c: wanted <= features.of(c, impl), settings=FIND_SETTINGS)
    except hypothesis.errors.NoSuchExample:
        return None


def smoke_cases(impl: Implementation) -> list[Case]:
    """The smoke set of `impl`: each declared mask component, tiling class and dtype in at least one case."""
    return list(_smoke_cases(impl))


@functools.cache
def _smoke_cases(impl: Implementation) -> tuple[Case, ...]:
    declared = features.declared(impl)
    lists = [[f"{g}:{v}" for v in _order(g, declared[g])] for g in GROUPS if declared.get(g)]
    out: list[Case] = []
    for i in range(max(len(values) for values in lists)):
        wanted = frozenset(values[i % len(values)] for values in lists)
        case = _smallest(impl, wanted)
        # A combination outside the contract (causal with q_len > kv_len on a kernel that
        # forbids it): each feature on its own instead.
        found = [case] if case is not None else [_smallest(impl, frozenset({w})) for w in sorted(wanted)]
        out += [c for c in found if c is not None and c not in out]
    return tuple(out)
