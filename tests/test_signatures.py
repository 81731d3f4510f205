"""harness.running.signatures: when two failures are the same bug."""

from __future__ import annotations

import pytest

from harness.core.compare import Comparison
from harness.core.masks import Mask
from harness.running.runner import CaseResult, SubjectResult
from harness.running.signatures import explains, plain, same_kind, signature, trigger_words
from tests import _fakes

KERNEL = _fakes.BROKEN


def _result(case=None, *, bad=("out",), note="", error=None, oracle_fails=False) -> CaseResult:
    comps = [
        Comparison(
            quantity=q, max_abs=1.0, max_rel=1.0, oracle_abs=1e-7, ratio=1e7, bound=1e-5, passed=False, note=note
        )
        for q in bad
    ]
    kernel = SubjectResult(
        implementation=KERNEL.name,
        role="kernel",
        backend="cpu",
        empty_rows="zeros",
        passed=False,
        comparisons=[] if error else comps,
        error=error,
    )
    oracle = SubjectResult(
        implementation="torch_sdpa",
        role="oracle",
        backend="cpu",
        empty_rows="zeros",
        passed=not oracle_fails,
        comparisons=[],
    )
    return CaseResult(case or _fakes.small_case(q_len=32), [kernel, oracle])


CAUSAL = _fakes.small_case(q_len=32, mask=Mask(causal="top_left"))


def test_the_plainest_case_has_no_features_of_its_own():
    assert plain(KERNEL) >= {"mask:none", "dtype:float32", "regime:normal", "heads:mha", "lengths:equal"}
    assert signature(_result(), KERNEL).features == frozenset()
    assert signature(_result(CAUSAL), KERNEL).features == {"mask:causal_top_left"}
    assert "(at the plainest case)" in str(signature(_result(), KERNEL))


@pytest.mark.parametrize(
    ("known", "other", "explained"),
    [
        pytest.param(_result(), _result(CAUSAL), True, id="plain-explains-causal"),
        pytest.param(_result(CAUSAL), _result(), False, id="causal-does-not-explain-plain"),
        pytest.param(_result(bad=("out",)), _result(bad=("out", "dbias")), True, id="more-quantities"),
        pytest.param(_result(bad=("out", "dq")), _result(bad=("out",)), False, id="fewer-quantities"),
        pytest.param(_result(), _result(note="3 non-finite values where the truth is finite"), False, id="non-finite"),
        pytest.param(_result(error="ValueError: x"), _result(error="ValueError: y"), True, id="same-error-type"),
        pytest.param(_result(error="ValueError: x"), _result(error="IndexError: x"), False, id="other-error-type"),
        pytest.param(_result(), _result(oracle_fails=True), True, id="oracles-not-judged"),
    ],
)
def test_a_failure_explains_another_of_its_kind_quantities_and_features(known, other, explained):
    assert explains(signature(known, KERNEL), other, KERNEL) is explained


def test_a_failure_reported_unshrunk_explains_its_kind_anywhere():
    sig = signature(_result(CAUSAL), KERNEL)
    assert not explains(sig, _result(), KERNEL) and explains(sig, _result(), KERNEL, anywhere=True)
    assert not explains(sig, _result(bad=("dq",)), KERNEL, anywhere=True)


def test_the_shrink_target_is_the_kind_of_failure_whatever_its_quantities_and_features():
    assert same_kind(_result(bad=("out", "dbias")), _result(CAUSAL, bad=("dq",)))
    assert not same_kind(_result(), _result(error="ValueError: x"))
    assert not same_kind(_result(), _result(note="non-finite values"))


@pytest.mark.parametrize(
    ("trigger", "needs", "said"),
    [
        (("mask:local_window",), ("mask:local_window",), "fails when: a local_window mask alone; passes without it"),
        (
            ("dtype:bfloat16", "heads:gqa"),
            ("dtype:bfloat16", "heads:gqa"),
            "fails when: bfloat16 inputs and grouped query heads (GQA); passes without any one of them",
        ),
        (
            ("mask:bias", "option:sinks"),
            ("option:sinks",),
            "fails when: a bias and the sinks option; passes without the sinks option; not shown needed: a bias",
        ),
        ((), (), "fails on the plainest case (no mask, one tile, the first dtype, normal values, equal lengths)"),
        (
            ("tiling:several_key_tiles",),
            ("tiling:several_key_tiles",),
            "fails when: several key tiles alone; passes without it",
        ),
        (
            ("tiling:several_minor",),
            (),
            "fails when: several minor tiling alone; not shown needed: several minor tiling",
        ),
    ],
)
def test_a_trigger_reads_as_the_features_it_needs(trigger, needs, said):
    assert trigger_words(trigger, needs) == said


def test_a_failure_without_options_explains_one_with_them():
    # option:none is the plainest: a bug shrunk to a case without options is the same bug with residuals
    # (the planted causal bug came out as two files, its causal case and one with residuals).
    from harness.core import contract
    from harness.core.case import Case

    xla = contract.resolve("jax_xla")  # declares the residuals option
    causal = Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=16, head_dim=64, mask=Mask(causal="top_left"))
    known = signature(_result(causal), xla)
    assert known.features == {"mask:causal_top_left"}
    assert explains(known, _result(causal.replace(residuals=True)), xla)


def test_a_feature_is_taken_away_alone_and_nothing_else_changes():
    from harness.core import contract, features
    from harness.core.case import Case
    from harness.core.masks import Lengths
    from harness.running.signatures import without

    xla = contract.resolve("jax_xla")
    case = Case(
        batch=2,
        q_heads=4,
        kv_heads=2,
        q_len=128,
        kv_len=128,
        head_dim=64,
        dtype="bfloat16",
        bias=True,
        regime="dominant",
        mask=Mask(causal="top_left", lengths=Lengths(q=(128, 100), kv=(128, 90))),
        seed=7,
    )
    for feature in sorted(features.of(case, xla) - plain(xla)):
        got = without(case, feature, xla)
        assert got is not None, feature
        assert features.of(got, xla) == features.of(case, xla) - {feature} | (features.of(got, xla) & plain(xla))
        assert (got.seed, got.q_len, got.head_dim, got.blocks) == (case.seed, case.q_len, case.head_dim, case.blocks)
    # One side of the lengths alone; the other stays.
    assert without(case, "mask:q_lengths", xla).mask.lengths == Lengths(kv=(128, 90))
    # A tiling class is no single edit.
    assert without(case, "tiling:several_tiles", xla) is None


def test_one_trigger_one_bug_whatever_quantities_a_dtype_keeps_within_its_bound():
    # fwd_v_offset_minor_blocks: reduced to "several minor tiles", failing out, dq and dk in float32; a bfloat16
    # case of the same bug kept its gradients inside their looser bound and failed in out alone (a third file).
    from harness.running.signatures import Signature, subsumes

    k = "tests.planted.fwd_v_offset_minor_blocks:flash_attention"
    reduced = Signature(
        how=((k, "wrong values", frozenset({"dk", "dq", "out"})),), features=frozenset({"tiling:several_minor"})
    )
    out_only = Signature(
        how=((k, "wrong values", frozenset({"out"})),), features=frozenset({"dtype:bfloat16", "tiling:several_minor"})
    )
    assert subsumes(reduced, out_only, trigger=True)
    assert not subsumes(reduced, out_only)  # a failure not reduced to its trigger needs all its quantities
    # Still the same kind of failure, in at least one shared quantity, in a case with the trigger's features.
    raised = Signature(how=((k, "raised", frozenset({"out"})),), features=frozenset({"tiling:several_minor"}))
    elsewhere = Signature(how=((k, "wrong values", frozenset({"dv"})),), features=frozenset({"tiling:several_minor"}))
    untiled = Signature(how=((k, "wrong values", frozenset({"out"})),), features=frozenset({"dtype:bfloat16"}))
    assert not any(subsumes(reduced, s, trigger=True) for s in (raised, elsewhere, untiled))


def test_a_reduced_failure_that_raised_explains_the_same_error_elsewhere():
    # A failure that raised fails in no quantity: overlap of its (empty) quantities is no test of sameness.
    from harness.running.signatures import Signature, subsumes

    raised = Signature(how=(("k", "raised ValueError", frozenset()),), features=frozenset({"mask:causal_top_left"}))
    again = Signature(
        how=(("k", "raised ValueError", frozenset()),), features=frozenset({"mask:causal_top_left", "dtype:float16"})
    )
    assert subsumes(raised, again, trigger=True) and subsumes(raised, again)


def _flash():
    from harness.core import contract

    return contract.resolve("pallas_flash")


def test_equal_lengths_grow_the_shorter_side_so_that_no_tile_is_taken_away():
    # Cutting the keys to the queries' length took the key tiles with it: a bug of the key loop (the planted
    # fwd_rescale_alpha) then claimed unequal lengths needed.
    from harness.core import contract, features
    from harness.core.case import Case
    from harness.running.signatures import without
    from kernels.pallas_flash import uniform_blocks

    flash = _flash()
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=64, blocks=uniform_blocks(), seed=5)
    assert "tiling:several_major" in features.of(case, flash)
    equal = without(case, "lengths:unequal", flash)
    assert (equal.q_len, equal.kv_len, equal.blocks, equal.seed) == (256, 256, case.blocks, case.seed)
    assert {"tiling:several_major", "lengths:equal"} <= features.of(equal, flash)
    longer_queries = Case(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=128, head_dim=64, seed=5)
    assert without(longer_queries, "lengths:unequal", contract.resolve("jax_xla")).kv_len == 256


def test_a_trigger_names_the_tiling_family_where_another_member_fails_alike():
    # pallas_flash's "several key tiles": several major or several minor key blocks. A bug of the key loop
    # shrinks to either, shard by shard; named by the family, its two shards' failures are one bug.
    from harness.core import features
    from harness.core.case import Case
    from harness.running.signatures import Signature, subsumes, trigger
    from kernels.pallas_flash import uniform_blocks

    flash = _flash()
    major, family = "tiling:several_major", "tiling:several_key_tiles"
    assert trigger(frozenset({major}), {major}, flash) == (family,)
    assert trigger(frozenset({major}), set(), flash) == (major,)  # the other member passed: this one is needed
    assert trigger(frozenset({"mask:causal_top_left"}), {"mask:causal_top_left"}, flash) == ("mask:causal_top_left",)
    how = (("k", "wrong values", frozenset({"out"})),)
    by_family = Signature(how=how, features=features.with_families(flash, frozenset({family})))
    by_minor = Signature(how=how, features=features.with_families(flash, frozenset({"tiling:several_minor"})))
    assert by_minor.features == {"tiling:several_minor", family}
    assert subsumes(by_family, by_minor, trigger=True) and not subsumes(by_minor, by_family, trigger=True)
    # A case is in the family by either member, and not with one key tile.
    minor = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=64, seed=1)
    minor = minor.replace(blocks=uniform_blocks() | {"block_k_major": 256})
    assert family in features.with_families(flash, features.of(minor, flash))
    one = minor.replace(kv_len=128, blocks=uniform_blocks())
    assert family not in features.with_families(flash, features.of(one, flash))


def test_the_smallest_case_leaves_out_what_is_unwanted_and_has_a_family_by_another_member():
    from harness.core import features, smoke

    flash = _flash()
    case = smoke.smallest(flash, frozenset({"tiling:several_key_tiles"}), frozenset({"tiling:several_major"}))
    assert case is not None
    have = features.of(case, flash)
    assert "tiling:several_minor" in have and "tiling:several_major" not in have


def test_a_tiling_family_names_two_declared_tilings_and_is_none_of_them():
    from harness.core.contract import Capabilities

    base = dict(dtypes=("float32",), head_dims=(64,), seq_lens=(128,), mask_components=frozenset())
    tilings = ("one_tile", "a", "b")
    Capabilities(**base, tilings=tilings, tiling_families=(("ab", ("a", "b")),))
    for bad in (("ab", ("a", "c")), ("a", ("a", "b")), ("ab", ("a",))):
        with pytest.raises(ValueError, match="tiling family"):
            Capabilities(**base, tilings=tilings, tiling_families=(bad,))


def test_a_candidate_of_the_trigger_search_is_the_same_data_with_one_tiling_edited_away():
    # The planted fwd_rescale_alpha, two shards: one shrank to L=256 with 128-row tiles (several major key blocks
    # and query tiles), the other to 128 queries on 256 keys in one major block (unequal lengths, minor blocks).
    # A tiling left out by the smallest case with the rest brought features and data of its own (the smallest
    # with several key tiles and no query tiles had unequal lengths): one trigger kept them, the other the query
    # tiles, two files. pallas_flash edits its block sizes instead (without_tiling): the same shapes and data,
    # exactly one tiling class less, a key tiling swapped for the other, and the family for one key tile.
    from harness.core import features
    from harness.core.case import Case
    from harness.running.signatures import reductions
    from kernels.pallas_flash import uniform_blocks

    flash = _flash()

    def candidates(case):
        have = features.of(case, flash) - plain(flash)
        out = {}
        for f, c, edited in reductions(case, have, flash):
            assert (c.q_len, c.kv_len, c.seed) == (case.q_len, case.kv_len, case.seed) or f == "lengths:unequal"
            out[f] = (features.of(c, flash) - plain(flash), edited)
        return out

    tiled = Case(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=256, head_dim=64, blocks=uniform_blocks())
    assert candidates(tiled) == {
        "tiling:several_key_tiles": ({"tiling:several_q_tiles"}, True),
        "tiling:several_major": ({"tiling:several_minor", "tiling:several_q_tiles"}, True),
        "tiling:several_q_tiles": ({"tiling:several_major"}, True),
    }
    unequal = tiled.replace(q_len=128, blocks=uniform_blocks() | {"block_k_major": 256})
    assert candidates(unequal) == {
        "lengths:unequal": ({"tiling:several_minor", "tiling:several_q_tiles"}, True),  # grown: no tile lost
        "tiling:several_key_tiles": ({"lengths:unequal"}, True),
        "tiling:several_minor": ({"lengths:unequal", "tiling:several_major"}, True),
    }


def test_without_an_adapter_edit_the_candidate_is_the_smallest_case_without_what_was_left_out(monkeypatch):
    # An adapter with no block edit (Implementation.without_tiling's default): a key tiling is left out for the
    # smallest case with the other member of its family, the family for the smallest with neither.
    from harness.core import features
    from harness.core.case import Case
    from harness.running.signatures import reductions
    from kernels.pallas_flash import uniform_blocks

    flash = _flash()
    monkeypatch.setattr(type(flash), "without_tiling", lambda self, case, tiling: None)
    tiled = Case(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=256, head_dim=64, blocks=uniform_blocks())
    have = features.of(tiled, flash) - plain(flash)
    got = {f: (features.of(c, flash), edited) for f, c, edited in reductions(tiled, have, flash)}
    major, minor, q_tiles = "tiling:several_major", "tiling:several_minor", "tiling:several_q_tiles"
    swapped, edited = got[major]
    assert not edited and minor in swapped and major not in swapped and q_tiles in swapped
    untiled, edited = got["tiling:several_key_tiles"]
    assert not edited and not {major, minor} & untiled and q_tiles in untiled
    one_q_tile, edited = got[q_tiles]
    assert not edited and q_tiles not in one_q_tile and major in one_q_tile
