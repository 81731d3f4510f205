"""The features of a case that a kernel declares, and how well a run covered them: singly and in pairs.

A feature is a `group:value` name. Groups: the mask components (`mask:causal_top_left`,
`mask:bias`, ..., `mask:none` for a case with none), `dtype`, `tiling` (the tiling classes an
implementation declares in Capabilities.tilings and reports per case with `tiling(case)`),
`regime`, `heads` (`mha`, or `gqa` when query heads share kv heads), `lengths`
(`equal`, or `unequal` q_len != kv_len) and `option` (the case's options the implementation
declares in Capabilities: `sinks`, `soft_cap`, `residuals`, or `none`). A case has one value per
group, except mask, tiling and option, where it may have several (causal and segments at once).

Pairwise coverage is the share of the declared feature pairs (values of two different
groups, or two mask components together) that some case of a run has both of: a bug that
needs two features at once can only be found by a case that has both.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from typing import Any

from harness.core.case import REGIMES, Case
from harness.core.contract import Implementation

# The first cases of a run whose pair coverage is measured (issue 17: a bug that needs two
# features should show within a run of this many cases).
PAIRWISE_WITHIN = 60
# Values that exclude every other value of their group: a case with no mask component, or
# with one tile per axis, pairs with nothing else in that group.
EXCLUSIVE = frozenset({"mask:none", "tiling:one_tile", "option:none"})
# The case options a kernel may declare (Capabilities fields of the same names): each is a value of
# the `option` group, so the pairwise plan pairs it with a dtype, a mask, a tiling class. Before, they
# were API options met once by the smoke set: splash's sinks met float32 only, and SPL-5 (dsinks summed
# in 16 bits) needs bfloat16 or float16 (docs/history.md).
OPTIONS = ("sinks", "soft_cap", "residuals")
# Groups a case may have several values of at once.
MULTI = ("mask", "tiling", "option")


def declared(impl: Implementation) -> dict[str, tuple[str, ...]]:
    """Every feature value `impl` declares, by group (a group with one value is still listed)."""
    caps = impl.capabilities
    components = sorted(caps.mask_components)
    out = {
        "mask": ("none", *components),
        "dtype": tuple(caps.dtypes),
        "tiling": tuple(caps.tilings),
        "regime": REGIMES,
        "heads": ("mha", "gqa") if caps.max_group > 1 or caps.max_kv_heads > 1 else ("mha",),
        "lengths": lengths(caps),
    }
    options = tuple(o for o in OPTIONS if getattr(caps, o))
    if options:
        out["option"] = ("none", *options)
    return {group: values for group, values in out.items() if values}


def lengths(caps: Any) -> tuple[str, ...]:
    """The `lengths` values a kernel's cases can have: equal where some query length is a key length
    (a decode kernel's one query never is), unequal where it takes unequal lengths and they can differ."""
    queries, keys = set(caps.q_lens or caps.seq_lens), set(caps.seq_lens)
    equal = ("equal",) if queries & keys else ()
    unequal = ("unequal",) if caps.unequal_lengths and len(queries | keys) > 1 else ()
    return equal + unequal


def of(case: Case, impl: Implementation) -> frozenset[str]:
    """The features `case` has, as `group:value` names."""
    mask = sorted(case.mask.components) + (["bias"] if case.bias else [])
    out = {f"mask:{m}" for m in mask or ["none"]}
    out |= {f"tiling:{t}" for t in impl.tiling(case)}
    out.add(f"dtype:{case.dtype}")
    out.add(f"regime:{case.regime}")
    out.add("heads:gqa" if case.q_heads != case.kv_heads else "heads:mha")
    out.add("lengths:unequal" if case.q_len != case.kv_len else "lengths:equal")
    declared_options = [o for o in OPTIONS if getattr(impl.capabilities, o)]
    if declared_options:  # (a kernel without options has no option group)
        options = [o for o in declared_options if getattr(case, o) not in (None, False)]
        out |= {f"option:{o}" for o in options or ["none"]}
    return frozenset(out)


def declared_families(impl: Implementation) -> dict[str, frozenset[str]]:
    """Every family `impl` declares (Capabilities.tiling_families, mask_families): each family's feature
    ("tiling:several_key_tiles", "mask:computable") -> its members' features."""
    caps = impl.capabilities
    groups = (("tiling", caps.tiling_families), ("mask", caps.mask_families))
    return {f"{g}:{name}": frozenset(f"{g}:{m}" for m in members) for g, fams in groups for name, members in fams}


def families(impl: Implementation, have: frozenset[str]) -> dict[str, frozenset[str]]:
    """The families (declared_families) a case with features `have` is in: a case is in a family when it has
    a member."""
    return {family: members for family, members in declared_families(impl).items() if members & have}


def with_families(impl: Implementation, have: frozenset[str]) -> frozenset[str]:
    """`have` with the families it is in (families): what a trigger naming a family is matched against."""
    return have | frozenset(families(impl, have))


def declared_pairs(impl: Implementation) -> set[frozenset[str]]:
    """Pairs of declared features: values of two different groups, or two of one group a case can have together."""
    named = [(group, f"{group}:{v}") for group, values in declared(impl).items() for v in values]
    pairs = set()
    for (g1, a), (g2, b) in itertools.combinations(named, 2):
        if g1 != g2 or (g1 in MULTI and not EXCLUSIVE & {a, b}):
            pairs.add(frozenset((a, b)))
    return pairs


@dataclasses.dataclass(frozen=True, kw_only=True)
class Coverage:
    """Which declared features and feature pairs the first `cases` cases of a run had."""

    cases: int
    features: int  # declared features seen
    declared_features: int
    pairs: int  # declared pairs seen
    declared_pairs: int
    missing_pairs: tuple[str, ...]  # "a + b", sorted: what no case had

    @property
    def pair_share(self) -> float:
        return self.pairs / self.declared_pairs if self.declared_pairs else 1.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"pair_share": self.pair_share}

    @classmethod
    def from_json(cls, d: Any) -> Coverage:
        """The object to_json wrote (its derived pair_share is recomputed); a ValueError names what is wrong."""
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(d, dict) or set(names) - set(d):
            missing = sorted(set(names) - set(d)) if isinstance(d, dict) else names
            raise ValueError(f"pairwise coverage {d!r} is missing fields {missing}")
        try:
            counts = {name: int(d[name]) for name in names if name != "missing_pairs"}
            return cls(**counts, missing_pairs=tuple(str(p) for p in d["missing_pairs"]))
        except (TypeError, ValueError) as e:
            raise ValueError(f"pairwise coverage {d!r} has a bad field: {e}") from None

    def line(self) -> str:
        return (
            f"pairwise coverage of declared features in the first {self.cases} cases: "
            f"{self.pair_share:.0%} ({self.pairs}/{self.declared_pairs} pairs; "
            f"{self.features}/{self.declared_features} features)"
        )


def coverage(impl: Implementation, cases: Iterable[Case], *, within: int = PAIRWISE_WITHIN) -> Coverage:
    """The declared features and pairs seen in the first `within` of `cases`."""
    seen_features: set[str] = set()
    seen_pairs: set[frozenset[str]] = set()
    n = 0
    for case in itertools.islice(cases, within):
        n += 1
        feats = of(case, impl)
        seen_features |= feats
        seen_pairs |= {frozenset(p) for p in itertools.combinations(sorted(feats), 2)}
    features = {f"{g}:{v}" for g, values in declared(impl).items() for v in values}
    pairs = declared_pairs(impl)
    missing = sorted(" + ".join(sorted(p)) for p in pairs - seen_pairs)
    return Coverage(
        cases=n,
        features=len(features & seen_features),
        declared_features=len(features),
        pairs=len(pairs & seen_pairs),
        declared_pairs=len(pairs),
        missing_pairs=tuple(missing),
    )
