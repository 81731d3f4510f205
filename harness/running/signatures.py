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

import numpy as np

from harness.core import features, smoke, strategies
from harness.core.case import REGIMES, Case, CaseError
from harness.core.contract import Implementation
from harness.core.inputs import make_inputs
from harness.core.masks import SHAPE_REQUIRED, Chunk, Mask, Window, dense_mask
from harness.running.runner import CaseResult, SubjectResult

__all__ = ["Signature", "explains", "how", "plain", "reductions", "same_kind", "signature", "subsumes", "trigger"]
__all__ += ["holds", "least_shapes", "nests", "smallest_with", "symptom", "trigger_words", "without"]

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
    return tuple((s.implementation, _kind(s), _bad(s)) for s in _failing(result))


def plain(impl: Implementation) -> frozenset[str]:
    """The features of the plainest case: what Hypothesis shrinks each group towards."""
    caps = impl.capabilities
    # "option:none": a case with no option is the plainest (a failure without one explains those with one).
    # Equal lengths, or unequal where none can be equal (a decode kernel's one query: features.lengths).
    length = f"lengths:{(features.lengths(caps) or ('equal',))[0]}"
    # No mask, or the first shape component where one is required (ragged paged attention is always causal).
    required = SHAPE_REQUIRED in caps.restrictions
    kinds = strategies.shape_kinds(caps.mask_components, caps.restrictions, queries_past_keys=False)
    mask = f"mask:{kinds[0]}" if required and kinds else "mask:none"
    out = {mask, "tiling:one_tile", f"regime:{REGIMES[0]}", "heads:mha", length, "option:none"}
    return frozenset(out | ({f"dtype:{caps.dtypes[0]}"} if caps.dtypes else set()))


def signature(result: CaseResult, impl: Implementation, trigger: tuple[str, ...] | None = None) -> Signature:
    """The signature of a failing `result` of `impl`'s search: where its trigger is known (the features it cannot
    fail without, harness.running.search), those; else its case's beyond the plainest. With the families
    they are in (features.with_families), so that a trigger naming a family ("several key tiles") explains
    a failure whose trigger names one of its members."""
    have = frozenset(trigger) if trigger is not None else features.of(result.case, impl) - plain(impl)
    return Signature(how=how(result), features=features.with_families(impl, have))


# Kinds of failure in numbers (_kind): a bug may show as either, as what the case computes changes.
_NUMBERS = ("non-finite", "wrong values")
# The faithful interpreter's bounds checks (jax's Pallas TPU interpreter, interpret_pallas_call: "Out-of-bounds
# read of", "... write of", "... block index"; its GPU twin the same words): memory the kernel does not own, which
# a device reads or writes unchecked. A raise only under the interpreter; on a device, values undefined.
_OUT_OF_BOUNDS = "Out-of-bounds "


def _in_numbers(subject: SubjectResult) -> bool:
    """Whether a failing subject failed in its numbers: wrong or non-finite values, or an out-of-bounds access the
    interpreter refused (what a device would compute from memory past the buffer is no number to trust)."""
    return subject.error is None or _OUT_OF_BOUNDS in subject.error


def symptom(other: CaseResult, best: CaseResult) -> bool:
    """Whether `other`, the case of the failure `best` with one feature left out (harness.running.search's
    trigger search), fails as the same bug with another symptom: the same implementations, each failing in
    numbers (non-finite values for wrong ones, or the reverse; or an out-of-bounds access, _in_numbers; never
    another raise) in exactly those of `best`'s failing quantities it computes. Splash's planted key offset
    fails with wrong values where sinks keep the first query row finite, and non-finite without them: one bug.
    The planted paged page-table offset gives wrong values where valid key lengths keep its reads inside the
    table, and reads past it (refused by the interpreter) without them: one bug. jax 0.7.0's float64 bug (NaN
    padded rows and dv) fails without float64 in the padded rows alone, dv right: another bug (NN-2), kept apart."""
    mine, theirs = _failing(other), _failing(best)
    if [s.implementation for s in mine] != [s.implementation for s in theirs]:
        return False
    for a, b in zip(mine, theirs, strict=True):
        if not (_in_numbers(a) and _in_numbers(b)):
            return False
        got, wanted = _bad(a), _bad(b)
        computed = {c.quantity for c in a.comparisons}
        # An access out of bounds computed nothing: it stands for any of the other's quantities.
        if a.error is None and b.error is None and got != wanted & computed:
            return False
    return True


def _failing(result: CaseResult) -> list[SubjectResult]:
    judged = [s for s in result.subjects if s.role != "oracle"] or result.subjects
    return [s for s in judged if not s.passed]


def _bad(subject: SubjectResult) -> frozenset[str]:
    return frozenset(c.quantity for c in subject.comparisons if not c.passed)


def nests(inner: Signature, outer: Signature) -> bool:
    """Whether two failures reduced to their triggers nest, kept apart: the same implementations fail, `outer`'s
    trigger holds `inner`'s and more, and `inner` does not explain it (another kind of failure: jax 0.7.0's
    NaN rows at float64 and query lengths hold the query-lengths bug's trigger, wrong values). The run
    says so (issue 48: "say so rather than merge silently"), where one may be the other with another symptom."""
    same = [impl for impl, _, _ in inner.how] == [impl for impl, _, _ in outer.how]
    return same and inner.features < outer.features and not subsumes(inner, outer, trigger=True)


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
    reported failures are compared, such as two shards' of one `run --jobs` (harness.running.jobs)."""
    same = [(i, k) for i, k, _ in known.how] == [(i, k) for i, k, _ in other.how]
    pairs = list(zip(known.how, other.how, strict=same))
    if trigger:  # a failure that raised has no quantities: it explains any that raised alike
        quantities = all(_tensors(q) & _tensors(got) or not q for (_, _, q), (_, _, got) in pairs)
    else:
        quantities = all(q <= got for (_, _, q), (_, _, got) in pairs)
    if not same or not quantities:
        return False
    return anywhere or known.features <= other.features


def _tensors(quantities: frozenset[str]) -> set[str]:
    """The tensors quantities are of: out[empty] (the rows no key is visible to) and out[padded] are out's rows. A
    bug that ignores key lengths fails in out[empty] where a case's rows hold no key, in out where they hold some."""
    return {q.partition("[")[0] for q in quantities}


def trigger(have: frozenset[str], replaced: set[str], impl: Implementation) -> tuple[str, ...]:
    """A failure's trigger from the features `have` of the case no feature can be left out of: a family
    (features.families: of tilings, of mask components) in place of its members where each it has was
    `replaced` (a case with another member of the family failed alike without it, harness.running.trigger),
    so that the trigger says what the bug needs ("several key tiles", "a computable mask"), not which of
    them the shrink happened to reach."""
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


def trigger_words(
    trigger: tuple[str, ...],
    needs: tuple[str, ...] = (),
    otherwise: tuple[str, ...] = (),
    plainest: frozenset[str] = frozenset(),
) -> str:
    """A failure's trigger (the features it cannot fail without, harness.running.search) as a maintainer reads it:
    'fails when: a local_window mask and bfloat16 inputs together; passes without either'. `needs`: the
    features shown needed (the case without each was run and passed); `otherwise`: those without which the
    case failed as another bug; the others could not be left out. `plainest`: the kernel's plainest case's
    features (plain), said where the trigger is empty."""
    if not trigger:
        if plainest:
            return f"fails on the plainest case ({', '.join(sorted(plainest))})"
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
    other = [said[f] for f in trigger if f in otherwise and f not in needs]
    if other:
        line += f"; without {' or without '.join(other)} it fails another way"
    rest = [said[f] for f in trigger if f not in needs and f not in otherwise]
    return line + (f"; not shown needed: {', '.join(rest)}" if rest else "")


def without(case: Case, feature: str, impl: Implementation) -> Case | None:
    """`case` with one feature taken away and nothing else changed (the same shapes, tiles and seed; equal
    lengths by the shorter side grown to the longer; a tiling class, or family, by the adapter's own edit of
    the block sizes, Implementation.without_tiling; a mask family's member swapped for another member,
    _masks_without): the trigger search's candidate (harness.running.search); None where no single edit
    removes it inside `impl`'s contract (a length side other masks are cut to)."""
    group, _, value = feature.partition(":")
    plainest = {f.partition(":")[0]: f.partition(":")[2] for f in plain(impl)}
    edits: dict[str, Any] = {}
    if group == "dtype":
        edits["dtype"] = plainest["dtype"]
    elif group == "regime":
        edits["regime"] = REGIMES[0]
    elif group == "option":
        edits[value] = None if value == "soft_cap" else False
    elif group == "heads" and case.mask.heads is None:  # the query heads cut to the kv heads' count
        edits["q_heads"] = case.kv_heads
    elif group == "heads":  # a mask per query head: the kv heads grown to the query heads' count
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
        masks = _masks_without(case, value, impl) if group == "mask" and value != "bias" else [case.mask]
    except (ValueError, TypeError, CaseError):
        return None
    for mask in masks:
        try:
            candidate = impl.without_tiling(case, value) if group == "tiling" else case.replace(**edits, mask=mask)
            if candidate is None:
                return None
            make_inputs(candidate)  # a candidate whose inputs cannot be built is no candidate, never a harness error
        except (ValueError, TypeError, CaseError):
            continue
        if feature not in features.with_families(impl, features.of(candidate, impl)) and not impl.violations(candidate):
            return candidate
    return None


def _masks_without(case: Case, component: str, impl: Implementation) -> list[Mask]:
    """The case's mask without one component: a mask family (Capabilities.mask_families) without each of its
    members; a family's member taken away where another member stays, else swapped for each other member
    (_member_masks) that masks the case otherwise, in that order (a bug of splash's computed masks fails
    alike at a causal mask as at a window); else the one component taken away."""
    declared = dict(impl.capabilities.mask_families)
    if component in declared:
        mask = case.mask
        for member in declared[component]:
            mask = _mask_without(mask, member)
        return [mask]
    stripped = _mask_without(case.mask, component)
    members = next((m for m in declared.values() if component in m), None)
    if members is None:
        return [stripped]
    shape = dict(batch=case.batch, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len)
    visible = dense_mask(case.mask, **shape)
    # Where another member stays (splash's per-head causal masks beside a window), the member simply taken away.
    out = [stripped] if stripped.components & set(members) else []
    for member, edit in _member_masks(case).items():
        if member not in members or member == component or member in stripped.components:
            continue
        swapped = dataclasses.replace(stripped, **edit)
        if swapped.components != stripped.components | {member}:
            continue  # the member's field is taken by another component the case has
        if not np.array_equal(dense_mask(swapped, **shape), visible):
            out.append(swapped)
    return out


def _member_masks(case: Case) -> dict[str, dict[str, Any]]:
    """Each mask family member on the case's own shapes, as Mask fields, in the order a member is swapped
    for another (_masks_without): the parameter-free causal mask first; then a causal sliding window over
    half the keys, a chunk of half the longer side, bottom-right causal (top-left's twin at equal lengths),
    a causal mask one key past the diagonal."""
    return {
        "causal_top_left": {"causal": "top_left"},
        "window": {"window": Window(left=max(0, case.kv_len // 2 - 1), right=0, offset=case.kv_len - case.q_len)},
        "chunk": {"chunk": Chunk(size=max(1, max(case.q_len, case.kv_len) // 2))},
        "causal_bottom_right": {"causal": "bottom_right"},
        "causal_offset": {"window": Window(left=None, right=0, offset=1)},
    }


def smallest_with(trigger: tuple[str, ...], impl: Implementation) -> Case | None:
    """The smallest case with exactly `trigger`'s features beyond the plainest case's (a family by a member): the
    trigger search's last candidate (harness.running.trigger), since its reductions grow lengths so as to keep
    tiles (the planted causal bug's 128 queries on 512 keys came out at 512). Found as the smallest with the
    trigger, shrunk towards the plainest (asked for exactly the trigger up front, no draw of 1000 had causal,
    one tile, float32, MHA, ... at once); None where that one has more (flash's smallest with several key tiles
    has query tiles too: the best is kept, whose data the trigger was shown on)."""
    case = smoke.smallest(impl, frozenset(trigger))
    if case is None:
        return None
    return case if holds(case, trigger, impl) else None


def holds(case: Case, trigger: tuple[str, ...], impl: Implementation) -> bool:
    """Whether `case` has exactly the features of `trigger`: each of them (a family by any member), and no other
    (a family's members count as the family: splash's window for the causal mask its trigger was shown with)."""
    have = features.of(case, impl) - plain(impl)
    named = features.declared_families(impl)
    allowed = set(trigger).union(*(named.get(f, frozenset()) for f in trigger))
    return set(trigger) <= features.with_families(impl, have) and have <= allowed


def least_shapes(case: Case, impl: Implementation) -> Case | None:
    """`case` with one head and the least declared head_dim, in one batch row where its tiles allow (flash's
    block_b tiles the batch), its lengths, tiles, mask and seed kept, where its features stay the same
    (harness.running.trigger's last candidate where no smallest case has exactly the trigger: flash's smallest
    with several key tiles has query tiles too); None where neither edit keeps them."""
    head_dim = min(impl.capabilities.head_dims, default=case.head_dim)
    for batch in (1, case.batch):
        try:
            smaller = case.replace(batch=batch, q_heads=1, kv_heads=1, head_dim=head_dim)
            make_inputs(smaller)
        except (ValueError, TypeError, CaseError):
            continue
        if features.of(smaller, impl) == features.of(case, impl) and not impl.violations(smaller):
            return smaller if smaller != case else None
    return None


def reductions(
    best: Case, have: frozenset[str], impl: Implementation, last: frozenset[str] = frozenset()
) -> Iterator[tuple[str, Case | None, bool]]:
    """Each feature `have` of the case `best` left out in turn (harness.running.search's trigger search): the
    feature, the candidate without it, and whether that is `best` with the one feature taken away (without).
    Else the smallest case with the others and without it (smoke.smallest); a family's member is left
    out for another member of its family, and the family (features.families) for all of them. Those in
    `last` (needed by an earlier best) come last: a feature that can go is met first, one run a round."""
    families = features.families(impl, have)
    for left_out in sorted(have | set(families), key=lambda f: (f in last, f)):
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
    # Only the component named: a per-head mask's top-left causal head keeps its bottom-right ones.
    if component.startswith("causal_") and component != "causal_offset":
        edits: dict[str, Any] = {"causal": None} if f"causal_{mask.causal}" == component else {}
    elif component in ("causal_offset", "window"):
        own = None if mask.window is None else "causal_offset" if mask.window.is_causal else "window"
        edits = {"window": None} if own == component else {}
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
