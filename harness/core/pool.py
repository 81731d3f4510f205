"""Compiled programs reused within a run: most cases take their compile-relevant part from a small pool.

Under the Pallas TPU interpreter a kernel's first call of a new program costs ~3 CPU s, the
same program again ~0.35 s (measured: pallas_flash, L=256, fwd+bwd; README "Where a case's
time goes"). What pallas_flash's program depends on, measured the same way: the shapes, dtype,
block sizes, scale, causal, and whether segment ids and a bias are passed. What it takes as
data: q, k, v (the seed and regime), the bias values, the segment ids. So a pool entry fixes
the first and each case draws the second anew (harness.core.strategies._reusing), valid lengths
too. Reuse is JAX's own cache: where another kernel bakes some of that data into its program,
its case compiles as before; a program is never reused for a case it was not compiled for.

A run's pool: the skeletons of its smoke cases (checked first anyway, so their programs are
compiled already), then `extra` skeletons picked from drawn candidates for the feature pairs
they add (harness.core.features). Everything is drawn from one seed: the run's, or for a
derandomized run one derived from the kernel's name, so a run, its replay and its shards draw
the same pool. A case from the pool is a complete Case: its repro file stands alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Sequence

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness.core import features, strategies
from harness.core.case import REGIMES, Case
from harness.core.contract import Implementation
from harness.core.masks import Lengths, Segments

__all__ = ["cost", "draw_pool", "extra_entries", "pool_seed", "program_key", "size"]

# One extra pool entry per this many cases of a run: each compiled program then serves about
# this many cases (a new program costs ~3 CPU s, a reused one ~0.3 s), and a 500-case
# nightly run still sees ~40 pool shapes besides its smoke cases and the cases drawn whole
# (harness.running.search.FRESH_ONE_IN). Measured with benchmarks/pairwise.py (pallas_flash, ci,
# first 60 cases, with smoke cases): 12 cases a program and 40 candidates an entry cover 92% of
# the declared feature pairs; 8 and 40, 94%; 8 and 10, 93%; 12 and 10, 85%; 16 and 60, 83%.
CASES_PER_PROGRAM = 12
MIN_EXTRA = 2
# Candidates drawn per extra entry, from which the entries adding most feature pairs are picked
# (drawing 160 of them takes ~0.4 CPU s).
CANDIDATES_PER_ENTRY = 40
_COLLECT = settings(
    database=None,
    derandomize=False,
    deadline=None,
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)


def program_key(case: Case) -> Case:
    """`case` with what compiled programs take as data set to fixed values: cases with equal keys
    run the same compiled programs (of pallas_flash exactly; of other kernels at least as many)."""
    mask = case.mask
    if mask.segments is not None:
        mask = dataclasses.replace(
            mask, segments=Segments(q=(((0, case.q_len),),) * case.batch, kv=(((0, case.kv_len),),) * case.batch)
        )
    if mask.lengths is not None:
        full = {"q": case.q_len, "kv": case.kv_len, "kv_starts": 0}
        sides = {side: None if getattr(mask.lengths, side) is None else (n,) * case.batch for side, n in full.items()}
        mask = dataclasses.replace(mask, lengths=Lengths(**sides))
    return case.replace(mask=mask, seed=0, regime="normal")


def extra_entries(examples: int) -> int:
    """Pool entries besides the smoke cases' for a run of `examples` cases."""
    return max(MIN_EXTRA, examples // CASES_PER_PROGRAM)


def pool_seed(impl: Implementation, seed: int | None) -> int:
    """The pool's seed: from the run's seed, or (derandomized, unseeded) from the kernel's name alone."""
    text = impl.name if seed is None else f"{impl.name}:{seed}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _candidates(strategy: st.SearchStrategy[Case], n: int, seed: int) -> list[Case]:
    """The first `n` cases Hypothesis draws from `strategy` with `seed`: the same every time."""
    out: list[Case] = []

    def collect(case: Case) -> None:
        out.append(case)

    hypothesis.seed(seed)(settings(_COLLECT, max_examples=n)(given(strategy)(collect)))()
    return out


def _pairs(case: Case, impl: Implementation, declared: set[frozenset[str]]) -> set[frozenset[str]]:
    # The regime is drawn per case, not per entry: its pairs are not the pool's to cover.
    named = sorted(f for f in features.of(case, impl) if not f.startswith("regime:"))
    return {frozenset(p) for p in itertools.combinations(named, 2)} & declared


# Fields whose values a pool spreads over once feature pairs are covered: the programs' other
# constants (a bug at head_dim 80 or scale 0.03 needs an entry with it).
SPREAD = ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim", "dtype", "scale", "soft_cap", "blocks")


def _values(case: Case) -> set[tuple[str, object]]:
    return {(name, getattr(case, name)) for name in SPREAD}


def draw_pool(
    impl: Implementation,
    *,
    extra: int,
    seed: int,
    smoke: Sequence[Case] = (),
    dtypes: tuple[str, ...] | None = None,
    regimes: tuple[str, ...] = REGIMES,
) -> tuple[Case, ...]:
    """The smoke cases' skeletons and `extra` drawn skeletons that add the most uncovered feature
    pairs, and among those the most field values (SPREAD) no entry has yet; smallest first.

    Skeletons are distinct by program_key; fewer than asked come back when the contract has
    fewer distinct programs than that.
    """
    if extra < 0:
        raise ValueError(f"extra={extra} must be >= 0")
    declared = features.declared_pairs(impl)
    pool: dict[Case, Case] = {}
    covered: set[frozenset[str]] = set()
    seen: set[tuple[str, object]] = set()
    for case in smoke:
        if program_key(case) not in pool:
            pool[program_key(case)] = case
            covered |= _pairs(case, impl, declared)
            seen |= _values(case)
    candidates: dict[Case, Case] = {}
    for case in _candidates(strategies.cases(impl, dtypes=dtypes, regimes=regimes), extra * CANDIDATES_PER_ENTRY, seed):
        candidates.setdefault(program_key(case), case)
    for key in pool:
        candidates.pop(key, None)
    # From the cheaper half: a pool entry runs many times, and under the interpreter a case
    # costs about its grid steps (measured, pallas_flash, all steps of a reused program: 0.2-0.3
    # CPU s at B=1, H=1, L<=256; 3.2-3.8 s at B=2, 8 heads, L=384). The cases drawn whole
    # (harness.running.search.FRESH_ONE_IN) bring the large ones.
    if candidates:
        cap = sorted(cost(c) for c in candidates.values())[(len(candidates) - 1) // 2]
        candidates = {k: c for k, c in candidates.items() if cost(c) <= cap}
    offers = {k: (_pairs(c, impl, declared), _values(c)) for k, c in candidates.items()}
    for _ in range(extra):
        if not offers:
            break
        key = max(offers, key=lambda k: (len(offers[k][0] - covered), len(offers[k][1] - seen)))
        pairs, values = offers.pop(key)
        pool[key] = candidates[key]
        covered |= pairs
        seen |= values
    # Smallest first: shrinking moves towards the first entry, so an earlier entry must be a smaller case.
    return tuple(sorted(pool.values(), key=size))


def cost(case: Case) -> int:
    """What a case costs to run, roughly: its score tiles (batch x query heads x q_len x kv_len)."""
    return case.batch * case.q_heads * case.q_len * case.kv_len


def size(case: Case) -> tuple[int, int, int]:
    """How large a case is: its q k^T work, then heads, then batch (what shrinking should lower)."""
    return (cost(case) * case.head_dim, case.q_heads, case.batch)
