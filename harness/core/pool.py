"""Compiled programs reused within a run: most cases take their compile-relevant part from a small pool.

Under the Pallas TPU interpreter a kernel's first call of a new program costs ~3 CPU s, the
same program again ~0.35 s (measured: pallas_flash, L=256, fwd+bwd; README "Where a case's
time goes"). What pallas_flash's program depends on, measured the same way: the shapes, dtype,
block sizes, scale, causal, and whether segment ids and a bias are passed. What it takes as
data: q, k, v (the seed and regime), the bias values, the segment ids. So a pool entry fixes
the first and each case draws the second anew (harness.core.strategies._reusing), valid lengths
too; an entry's regime is the one planned for its cases (_planned), which most of them take.
Reuse is JAX's own cache: where another kernel bakes some of that data into its program, its
case compiles as before; a program is never reused for a case it was not compiled for.

A run's pool: the skeletons of its smoke cases (checked first anyway, so their programs are
compiled already), then `extra` skeletons picked from drawn candidates for the feature pairs
they add (harness.core.features). Everything is drawn from one seed: the run's, or for a
derandomized run one derived from the kernel's name, so a run, its replay and its shards draw
the same pool. A case from the pool is a complete Case: its repro file stands alone.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
from collections.abc import Callable, Sequence

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness.core import features, strategies
from harness.core.case import REGIMES, Case
from harness.core.contract import Implementation
from harness.core.masks import Lengths, Segments

__all__ = ["candidate_count", "cost", "draw_pool", "extra_entries", "pool_seed", "program_key", "size"]

# Extra pool entries per case of a run: with a program's reuse nearly free (the fast interpreter:
# 0.03 CPU s against 0.6-1.3 s for a new program, issue 24) a run buys breadth with programs, not
# repeats; a case drawn from a pool of E entries meets a new program about as often as E allows.
# Measured with benchmarks/breadth.py (pallas_flash, 60 cases, seed 1, the draw alone): README
# "Breadth of a run".
ENTRIES_PER_CASE = 0.6
MIN_EXTRA = 2
# Candidates drawn per extra entry (at least MIN_CANDIDATES), from which the entries adding most
# feature pairs are picked (drawing 160 of them takes ~0.4 CPU s); once the pairs are covered the
# picks go by the field values they add (SPREAD), where a few candidates each suffice.
CANDIDATES_PER_ENTRY = 6
MIN_CANDIDATES = 160
# Rounds of candidates a shard draws (harness.running.jobs) until it owns enough of them.
OWNED_ROUNDS = 4
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
    return max(MIN_EXTRA, int(examples * ENTRIES_PER_CASE))


def candidate_count(extra: int) -> int:
    """Candidates drawn to pick `extra` entries from."""
    return max(MIN_CANDIDATES, extra * CANDIDATES_PER_ENTRY)


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
    # The regime is data, not part of a program: its pairs are planned once the entries are picked (_planned).
    named = sorted(f for f in features.of(case, impl) if not f.startswith("regime:"))
    return {frozenset(p) for p in itertools.combinations(named, 2)} & declared


# Fields whose values a pool spreads over once feature pairs are covered: the programs' other
# constants (a bug at head_dim 80 or scale 0.03 needs an entry with it).
SPREAD = ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim", "dtype", "scale", "soft_cap", "blocks")


def _values(case: Case) -> set[tuple[str, object]]:
    return {(name, getattr(case, name)) for name in SPREAD}


def _tiles(case: Case, impl: Implementation) -> frozenset[str]:
    """The tiling classes a case has beyond one tile (several query tiles, major blocks, inner key steps ...)."""
    return frozenset(t for t in impl.tiling(case) if t != "one_tile")


def _tilings(case: Case, impl: Implementation) -> int:
    return len(_tiles(case, impl))


def _owned_candidates(
    impl: Implementation, strategy: st.SearchStrategy[Case], n: int, seed: int, owns: Callable[[Case], bool] | None
) -> list[Case]:
    """`n` candidates (distinct by program), the ones `owns` is true of, drawn in up to OWNED_ROUNDS rounds."""
    found: dict[Case, Case] = {}
    for round_ in range(1 if owns is None else OWNED_ROUNDS):
        for case in _candidates(strategy, n, seed + round_):
            if owns is None or owns(case):
                found.setdefault(program_key(case), case)
        if len(found) >= n:
            break
    return list(found.values())


def _cheaper_half(candidates: dict[Case, Case], impl: Implementation) -> dict[Case, Case]:
    """The candidates at or below the median cost of those with as many tiling classes."""
    by_class: dict[int, list[int]] = {}
    for c in candidates.values():
        by_class.setdefault(_tilings(c, impl), []).append(cost(c))
    caps = {n: sorted(costs)[(len(costs) - 1) // 2] for n, costs in by_class.items()}
    return {k: c for k, c in candidates.items() if cost(c) <= caps[_tilings(c, impl)]}


def _smoke_entries(
    impl: Implementation,
    smoke: Sequence[Case],
    declared: set[frozenset[str]],
    owns: Callable[[Case], bool] | None,
) -> tuple[dict[Case, Case], set[frozenset[str]], set[tuple[str, object]]]:
    """The pool's first entries, one per program of the smoke cases it owns (program key -> case), with
    the feature pairs and field values they cover."""
    pool: dict[Case, Case] = {}
    covered: set[frozenset[str]] = set()
    seen: set[tuple[str, object]] = set()
    for case in smoke:
        if program_key(case) not in pool and (owns is None or owns(case)):
            pool[program_key(case)] = case
            covered |= _pairs(case, impl, declared)
            seen |= _values(case)
    return pool, covered, seen


def draw_pool(
    impl: Implementation,
    *,
    extra: int,
    seed: int,
    smoke: Sequence[Case] = (),
    dtypes: tuple[str, ...] | None = None,
    regimes: tuple[str, ...] = REGIMES,
    owns: Callable[[Case], bool] | None = None,
) -> tuple[Case, ...]:
    """The smoke cases' skeletons and `extra` drawn skeletons that add the most uncovered feature
    pairs, then the tiling classes fewest entries have, then the most field values (SPREAD) no
    entry has yet; smallest first; each with the regime planned for its cases (_planned).

    owns: only skeletons it is true of (a shard's programs, harness.running.jobs), picked for
    what they add to this shard's own entries, so that each shard's pool spans the whole space.
    Skeletons are distinct by program_key; fewer than asked come back when the contract has
    fewer distinct programs than that.
    """
    if extra < 0:
        raise ValueError(f"extra={extra} must be >= 0")
    declared = features.declared_pairs(impl)
    pool, covered, seen = _smoke_entries(impl, smoke, declared, owns)
    strategy = strategies.cases(impl, dtypes=dtypes, regimes=regimes)
    candidates = {program_key(c): c for c in _owned_candidates(impl, strategy, candidate_count(extra), seed, owns)}
    for key in pool:
        candidates.pop(key, None)
    # From the cheaper half of each tiling class: under the interpreter a case costs about its grid
    # steps (measured, pallas_flash, all steps of a reused program: 0.2-0.3 CPU s at B=1, H=1,
    # L<=256; 3.2-3.8 s at B=2, 8 heads, L=384), and the cases drawn whole
    # (harness.running.search.FRESH_ONE_IN) bring the large ones; but several tiles per axis need
    # longer sequences, and a cap over all candidates would leave few of them (inner key steps per
    # major block: 5 of 176 in the cheaper half, 30 of 300 candidates, measured).
    candidates = _cheaper_half(candidates, impl)
    offers = {k: (_pairs(c, impl, declared), _values(c), _tiles(c, impl)) for k, c in candidates.items()}
    # Entries per tiling class so far: once the pairs are covered, the classes fewest entries have
    # come first, so that each class (inner key steps per major block too) fills its share of the pool.
    tiled = collections.Counter(t for c in pool.values() for t in _tiles(c, impl))

    def offer(k: Case) -> tuple[int, float, int]:
        pairs, values, tiles = offers[k]
        return len(pairs - covered), sum(1 / (1 + tiled[t]) for t in tiles), len(values - seen)

    for _ in range(extra):
        if not offers:
            break
        key = max(offers, key=offer)
        pairs, values, tiles = offers.pop(key)
        pool[key] = candidates[key]
        covered |= pairs
        seen |= values
        tiled.update(tiles)
    # Smallest first: shrinking moves towards the first entry, so an earlier entry must be a smaller case.
    entries = sorted(pool.values(), key=size)
    checked = [c for c in smoke if owns is None or owns(c)]
    return tuple(_planned(entries, impl, declared, checked=checked, regimes=regimes))


def _regime_pairs(case: Case, impl: Implementation, declared: set[frozenset[str]]) -> set[frozenset[str]]:
    named = features.of(case, impl)
    regime = f"regime:{case.regime}"
    return {frozenset((regime, f)) for f in named if f != regime} & declared


def _planned(
    entries: Sequence[Case],
    impl: Implementation,
    declared: set[frozenset[str]],
    *,
    checked: Sequence[Case],
    regimes: tuple[str, ...],
) -> list[Case]:
    """The entries, each with the regime its cases take first (harness.core.strategies._reusing).

    The regime is data, drawn per case; drawn at random, a shard's ~25 cases left a third of the
    regime pairs (a regime with a dtype, a mask, a tiling class) unmet: pairwise coverage of
    `--jobs 2` was 85-90% per shard, 93-94% merged (benchmarks/breadth.py, seeds 1-3). So each
    entry is planned a regime, greedily: the one adding most regime pairs not met yet by the
    smoke cases (`checked`) or the entries planned before it; once they are met, the regime
    planned least often. The entries of smoke cases' programs come last, as their turns do.
    An entry's scale limits its regimes (strategies.takes_scale).
    """
    regimes = tuple(r for r in regimes if r in impl.capabilities.regimes)
    covered = set().union(*(_regime_pairs(c, impl, declared) for c in checked))
    offers = {
        i: {
            r: _regime_pairs(e.replace(regime=r), impl, declared)
            for r in regimes
            if strategies.takes_scale(r, e.scale, e.head_dim)  # the entry's scale is compiled in
        }
        for i, e in enumerate(entries)
    }
    # An entry whose scale takes none of the regimes keeps its own (its cases are rejected, as before).
    offers = {i: by for i, by in offers.items() if by}
    planned = list(entries)
    uses: collections.Counter = collections.Counter()

    def gain(choice: tuple[int, str]) -> tuple[int, int]:
        i, r = choice
        return len(offers[i][r] - covered), -uses[r]

    # The smoke cases' entries last: their programs have had a case each already, so the pool's turns
    # (harness.running.search.Search.spent) come back to them after every other entry's.
    smoked = {program_key(c) for c in checked}
    while offers:
        fresh = [i for i in offers if program_key(entries[i]) not in smoked] or list(offers)
        i, r = max(((i, r) for i in fresh for r in offers[i]), key=gain)
        planned[i] = entries[i].replace(regime=r)
        covered |= offers.pop(i)[r]
        uses[r] += 1
    return planned


def cost(case: Case) -> int:
    """What a case costs to run, roughly: its score tiles (batch x query heads x q_len x kv_len)."""
    return case.batch * case.q_heads * case.q_len * case.kv_len


def size(case: Case) -> tuple[int, int, int]:
    """How large a case is: its q k^T work, then heads, then batch (what shrinking should lower)."""
    return (cost(case) * case.head_dim, case.q_heads, case.batch)
