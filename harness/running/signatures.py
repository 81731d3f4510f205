"""What makes two failures the same bug: a signature, so that a search reports each distinct one once.

A failure's signature: which implementations failed, how (the exception type raised; non-finite
values where the truth is finite; wrong values) and in which quantities (out, dq, dk, dv, ...),
and the features of its case (harness.core.features) that the plainest case lacks. A failing case
is explained by a known failure when it fails the same implementations the same way, in at least
the known failure's quantities, and has every one of its features: a bug shrunk to a plain case
(mask none, one tile, the first dtype) explains every failure of its kind, one shrunk to causal
with segments only those with both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from harness.core import features, smoke
from harness.core.case import REGIMES, Case, CaseError
from harness.core.contract import Implementation
from harness.core.inputs import make_inputs
from harness.core.masks import Mask
from harness.running.runner import CaseResult, SubjectResult

__all__ = ["Signature", "explains", "how", "plain", "reductions", "same_kind", "signature", "subsumes", "trigger"]
__all__ += ["trigger_words", "without"]

# A comparison note the harness writes where the kernel returned non-finite values (harness.core.compare).
_NON_FINITE = "non-finite"


@dataclasses.dataclass(frozen=True)
class Signature:
    """How a case failed (`how`: per failing implementation, its kind and failing quantities) and where
    (`features`: the case's features beyond the plainest case's)."""

    how: tuple[tuple[str, str, frozenset[str]], ...]
    features: frozenset[str]

    def __str__(self) -> str:
        parts = [f"{impl} {kind} in {', '.join(sorted(q)) or '-'}" for impl, kind, q in self.how]
        where = ", ".join(sorted(self.features)) or "the plainest case"
        return f"{'; '.join(parts)} (at {where})"

    def to_json(self) -> dict[str, list]:
        return {"how": [[impl, kind, sorted(q)] for impl, kind, q in self.how], "features": sorted(self.features)}

    @classmethod
    def from_json(cls, doc: dict[str, list]) -> Signature:
        how = tuple((str(impl), str(kind), frozenset(str(x) for x in q)) for impl, kind, q in doc["how"])
        return cls(how=how, features=frozenset(str(f) for f in doc["features"]))


def _kind(subject: SubjectResult) -> str:
    if subject.error is not None:
        return "raised " + subject.error.partition(":")[0]
    bad = [c for c in subject.comparisons if not c.passed]
    if any(_NON_FINITE in (c.note or "") for c in bad):
        return "non-finite"
    return "wrong values"


def how(result: CaseResult) -> tuple[tuple[str, str, frozenset[str]], ...]:
    """Per failing implementation (the kernels', where a kernel failed): its kind of failure and failing quantities."""
    judged = [s for s in result.subjects if s.role != "oracle"] or result.subjects
    return tuple(
        (s.implementation, _kind(s), frozenset(c.quantity for c in s.comparisons if not c.passed))
        for s in judged
        if not s.passed
    )


def plain(impl: Implementation) -> frozenset[str]:
    """The features of the plainest case: what Hypothesis shrinks each group towards."""
    caps = impl.capabilities
    # "option:none": a case with no option is the plainest (a failure without one explains those with one).
    out = {"mask:none", "tiling:one_tile", f"regime:{REGIMES[0]}", "heads:mha", "lengths:equal", "option:none"}
    return frozenset(out | ({f"dtype:{caps.dtypes[0]}"} if caps.dtypes else set()))


def signature(result: CaseResult, impl: Implementation, trigger: tuple[str, ...] | None = None) -> Signature:
    """The signature of a failing `result` of `impl`'s search: where its trigger is known (the features it cannot
    fail without, harness.running.search), those; else its case's beyond the plainest. With the tiling families
    they are in (features.with_families), so that a trigger naming a family ("several key tiles") explains
    a failure whose trigger names one of its members."""
    have = frozenset(trigger) if trigger is not None else features.of(result.case, impl) - plain(impl)
    return Signature(how=how(result), features=features.with_families(impl, have))


def same_kind(a: CaseResult, b: CaseResult) -> bool:
    """Whether two failures failed the same way: the same implementations, each with the same kind of failure."""
    return [(impl, kind) for impl, kind, _ in how(a)] == [(impl, kind) for impl, kind, _ in how(b)]


def explains(
    known: Signature, result: CaseResult, impl: Implementation, *, anywhere: bool = False, trigger: bool = False
) -> bool:
    """Whether the failure `known` explains the failing `result`: the same kinds of failure, in at least its
    quantities (a case with a bias fails in dbias too), in a case with its features (anywhere: in any case,
    for a failure reported unshrunk, whose features are its draw's). trigger: `known`'s features are its
    trigger (harness.running.search reduced it to the features it cannot fail without): then a case with
    them that fails the same way in any of its quantities is the same bug, one trigger one bug (a bfloat16
    case of a forward bug may keep its gradients inside their looser bound, failing in `out` alone)."""
    other = Signature(how=how(result), features=features.with_families(impl, features.of(result.case, impl)))
    return subsumes(known, other, anywhere=anywhere, trigger=trigger)


def subsumes(known: Signature, other: Signature, *, anywhere: bool = False, trigger: bool = False) -> bool:
    """Whether the failure `known` explains a failure whose signature is `other` (as `explains`): how two
    reported failures are compared, such as two shards' of one `run --jobs` (harness.running.shards)."""
    same = [(i, k) for i, k, _ in known.how] == [(i, k) for i, k, _ in other.how]
    pairs = list(zip(known.how, other.how, strict=same))
    if trigger:  # a failure that raised has no quantities: it explains any that raised alike
        quantities = all(q & got or not q for (_, _, q), (_, _, got) in pairs)
    else:
        quantities = all(q <= got for (_, _, q), (_, _, got) in pairs)
    if not same or not quantities:
        return False
    return anywhere or known.features <= other.features


def trigger(have: frozenset[str], replaced: set[str], impl: Implementation) -> tuple[str, ...]:
    """A failure's trigger from the features `have` of the case no feature can be left out of: a tiling family
    (features.families) in place of its members where each it has was `replaced` (a case with another member
    of the family failed alike without it, harness.running.search), so that the trigger says what the bug
    needs ("several key tiles"), not which of them the shrink happened to reach."""
    out = set(have)
    for family, members in features.families(impl, have).items():
        if members & have <= replaced:
            out = out - members | {family}
    return tuple(sorted(out))


# How each feature group reads in a failure's trigger (trigger_words).
_WORDS = {
    "mask": lambda v: "a bias" if v == "bias" else f"a {v} mask",
    "dtype": lambda v: f"{v} inputs",
    "tiling": lambda v: v.replace("_", " ") + ("" if v.endswith(("tile", "tiles")) else " tiling"),
    "regime": lambda v: f"{v} values",
    "heads": lambda v: "grouped query heads (GQA)" if v == "gqa" else f"{v} heads",
    "lengths": lambda v: f"{v} query and key lengths",
    "option": lambda v: f"the {v} option",
}


def trigger_words(trigger: tuple[str, ...], needs: tuple[str, ...] = ()) -> str:
    """A failure's trigger (the features it cannot fail without, harness.running.search) as a maintainer reads it:
    'fails when: a local_window mask and bfloat16 inputs together; passes without either'. `needs`: the
    features shown needed (the case without each was run and passed); the others could not be left out."""
    if not trigger:
        return "fails on the plainest case (no mask, one tile, the first dtype, normal values, equal lengths)"
    said = {f: _WORDS.get(g, lambda v, g=g: f"{g} {v}")(v) for f, (g, _, v) in ((f, f.partition(":")) for f in trigger)}
    words = list(said.values())
    both = f"{', '.join(words[:-1])} and {words[-1]}" if len(words) > 1 else f"{words[0]} alone"
    line = f"fails when: {both}"
    shown = [said[f] for f in trigger if f in needs]
    if len(shown) == len(trigger):
        return line + ("; passes without it" if len(shown) == 1 else "; passes without any one of them")
    if shown:
        line += f"; passes without {', '.join(shown)}"
    return line + f"; not shown needed: {', '.join(said[f] for f in trigger if f not in needs)}"


def without(case: Case, feature: str, impl: Implementation) -> Case | None:
    """`case` with one feature taken away and nothing else changed (the same shapes, tiles and seed; equal
    lengths by the shorter side grown to the longer; a tiling class, or family, by the adapter's own edit of
    the block sizes, Implementation.without_tiling): the trigger search's candidate (harness.running.search);
    None where no single edit removes it inside `impl`'s contract (a length side other masks are cut to)."""
    group, _, value = feature.partition(":")
    plainest = {f.partition(":")[0]: f.partition(":")[2] for f in plain(impl)}
    edits: dict[str, Any] = {}
    if group == "dtype":
        edits["dtype"] = plainest["dtype"]
    elif group == "regime":
        edits["regime"] = REGIMES[0]
    elif group == "option":
        edits[value] = None if value == "soft_cap" else False
    elif group == "heads":
        edits["kv_heads"] = case.q_heads
    elif group == "lengths":
        # The shorter side grown to the longer: cutting the keys to the queries' length would take key tiles
        # away with the unequal lengths (a bug of the key loop would then claim unequal lengths needed).
        edits["q_len"] = edits["kv_len"] = max(case.q_len, case.kv_len)
    elif group == "mask" and value == "bias":
        edits["bias"] = False
    elif group not in ("mask", "tiling"):
        return None
    try:
        if group == "mask" and value != "bias":
            edits["mask"] = _mask_without(case.mask, value)
        candidate = impl.without_tiling(case, value) if group == "tiling" else case.replace(**edits)
        if candidate is None:
            return None
        make_inputs(candidate)  # a candidate whose inputs cannot be built is no candidate, never a harness error
    except (ValueError, TypeError, CaseError):
        return None
    if feature in features.with_families(impl, features.of(candidate, impl)) or impl.violations(candidate):
        return None
    return candidate


def reductions(best: Case, have: frozenset[str], impl: Implementation) -> Iterator[tuple[str, Case | None, bool]]:
    """Each feature `have` of the case `best` left out in turn (harness.running.search's trigger search): the
    feature, the candidate without it, and whether that is `best` with the one feature taken away (without).
    Else the smallest case with the others and without it (smoke.smallest); a tiling family's member is left
    out for another member of its family, and the family (features.families) for all of them."""
    families = features.families(impl, have)
    for left_out in sorted(have | set(families)):
        edited = without(best, left_out, impl)
        if edited is not None:
            yield left_out, edited, True
            continue
        gone = families.get(left_out, frozenset({left_out}))
        kept = {family for family, members in families.items() if left_out in members}
        yield left_out, smoke.smallest(impl, have - gone | kept, gone), False


_MASK_FIELDS = {"segments": "segments", "chunk": "chunk", "block_sparse": "block_sparse", "per_head": "heads"}
_LENGTH_SIDES = {"q_lengths": "q", "kv_lengths": "kv", "kv_starts": "kv_starts"}


def _mask_without(mask: Mask, component: str) -> Mask:
    """`mask` without one component, in itself and in each per-head mask."""
    if component.startswith("causal_") and component != "causal_offset":
        edits: dict[str, Any] = {"causal": None}
    elif component in ("causal_offset", "window"):
        edits = {"window": None}
    elif component in _LENGTH_SIDES and mask.lengths is not None:
        left = mask.lengths.components - {component}
        edits = {"lengths": dataclasses.replace(mask.lengths, **{_LENGTH_SIDES[component]: None}) if left else None}
    elif component in _MASK_FIELDS:
        edits = {_MASK_FIELDS[component]: None}
    else:
        edits = {}
    heads = mask.heads
    if heads is not None and component != "per_head":
        edits["heads"] = tuple(_mask_without(h, component) for h in heads)
    return dataclasses.replace(mask, **edits)
