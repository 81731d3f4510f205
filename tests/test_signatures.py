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


def test_a_failure_at_the_plainest_case_says_what_the_kernels_plainest_case_is():
    # Ragged paged attention is always causal, paged attention's one query never matches its keys.
    from harness.core import contract

    ragged = plain(contract.resolve("pallas_ragged_paged"))
    assert "mask:causal_bottom_right" in ragged and "mask:none" not in ragged
    said = trigger_words((), plainest=ragged)
    assert said.startswith("fails on the plainest case (") and "mask:causal_bottom_right" in said


def test_a_feature_without_which_the_case_fails_as_another_bug_is_not_said_to_pass():
    # jax 0.7.0's float64 bug (NN-4: NaN padded rows) without float64 is NN-2 (wrong padded rows): not a pass.
    trigger = ("dtype:float64", "mask:q_lengths")
    said = trigger_words(trigger, ("mask:q_lengths",), ("dtype:float64",))
    both = trigger_words(trigger, (), trigger)
    assert both.endswith("; without float64 inputs or without a q_lengths mask it fails another way"), both
    assert said == (
        "fails when: float64 inputs and a q_lengths mask; passes without a q_lengths mask; "
        "without float64 inputs it fails another way"
    )


def _with_quantities(result, computed, bad, note=""):
    import dataclasses

    (kernel, *rest) = result.subjects
    comps = [
        Comparison(
            quantity=q, max_abs=1.0, max_rel=1.0, oracle_abs=1e-7, ratio=1e7, bound=1e-5, passed=q not in bad, note=note
        )
        for q in computed
    ]
    return dataclasses.replace(result, subjects=[dataclasses.replace(kernel, comparisons=comps), *rest])


def test_a_symptom_is_the_same_quantities_failing_in_numbers_of_another_kind():
    from harness.running.signatures import symptom

    grads = ("out", "dq", "dk", "dv")
    # With sinks: wrong values everywhere (dsinks too); without: non-finite in every quantity it computes.
    with_sinks = _with_quantities(_result(), (*grads, "dsinks"), (*grads, "dsinks"))
    without = _with_quantities(_result(), grads, grads, note="64 non-finite values where the truth is finite")
    assert symptom(without, with_sinks) and symptom(with_sinks, without) is False  # dsinks computed, not failing
    # NN-4 without float64: the padded rows alone, dv right: another bug.
    nan_rows = _with_quantities(_result(), ("out[padded]", "dv"), ("out[padded]", "dv"), note="non-finite")
    padded = _with_quantities(_result(), ("out[padded]", "dv"), ("out[padded]",))
    assert not symptom(padded, nan_rows)
    # A raise is never a symptom of numbers, but for a read past a buffer the interpreter refuses (a device reads it
    # unchecked): the planted paged page-table offset without key lengths reads past the table.
    assert not symptom(_result(error="ValueError: boom"), without)
    oob = _result(error="JaxRuntimeError: IndexError: Out-of-bounds read of (0 1 smem 107): reading [(8,)]")
    wrong = _with_quantities(_result(), ("out",), ("out",))
    assert symptom(oob, wrong) and symptom(wrong, oob)
    assert not symptom(oob, _result(error="ValueError: boom"))


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


def test_rows_of_out_are_out_to_a_trigger():
    # The planted xla_ignores_kv_lengths reduced to "kv_lengths alone" on rows that hold no key (out[empty]); a case
    # whose rows hold some keys failed in out and the gradients, unreduced (its shrink budget spent): one bug.
    from harness.running.signatures import Signature, subsumes

    k = "jax_xla=tests.planted.xla_ignores_kv_lengths:dot_product_attention"
    reduced = Signature(how=((k, "wrong values", frozenset({"out[empty]"})),), features=frozenset({"mask:kv_lengths"}))
    grads = frozenset({"out", "dq", "dk", "dv"})
    drawn = Signature(how=((k, "wrong values", grads),), features=frozenset({"mask:kv_lengths", "heads:gqa"}))
    assert subsumes(reduced, drawn, trigger=True) and not subsumes(reduced, drawn)
    dq_only = Signature(how=((k, "wrong values", frozenset({"dq"})),), features=drawn.features)
    assert not subsumes(reduced, dq_only, trigger=True)


def test_triggers_nest_where_one_holds_the_others_and_fails_another_way():
    # jax 0.7.0: NaN rows at float64 and query lengths (NN-4) hold the trigger of wrong padded rows (NN-2).
    from harness.running.signatures import Signature, nests

    k = "jax_xla"
    padded = Signature(how=((k, "wrong values", frozenset({"out[padded]"})),), features=frozenset({"mask:q_lengths"}))
    nan = Signature(
        how=((k, "non-finite", frozenset({"out[padded]", "dv"})),), features=frozenset({"mask:q_lengths", "dtype:x"})
    )
    assert nests(padded, nan) and not nests(nan, padded)
    same_kind = Signature(how=((k, "wrong values", frozenset({"out"})),), features=nan.features)
    assert not nests(padded, same_kind)  # explained: one bug, merged, not said to nest
    assert not nests(padded, Signature(how=nan.how, features=padded.features))  # the same trigger: no nesting


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


def test_a_mask_family_names_two_declared_components_and_is_none_of_them():
    from harness.core.contract import Capabilities

    base = dict(dtypes=("float32",), head_dims=(64,), seq_lens=(128,))
    both = frozenset({"causal_top_left", "window"})
    Capabilities(**base, mask_components=both, mask_families=(("computable", ("causal_top_left", "window")),))
    for bad in (("computable", ("causal_top_left", "chunk")), ("window", tuple(both)), ("computable", ("window",))):
        with pytest.raises(ValueError, match="mask family"):
            Capabilities(**base, mask_components=both, mask_families=(bad,))


def test_splash_names_the_masks_its_kernel_computes_as_one_family_from_the_installed_classes():
    # A single CausalMask, LocalMask or ChunkedCausalMask is computed in splash's kernels by its mask function
    # (a _ComputableMask); a NumpyMask (block-sparse) is loaded from memory: not in the family.
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    from harness.core import contract
    from kernels.pallas_splash import computable

    members = computable(mask_lib)
    assert {"causal_top_left", "causal_bottom_right", "causal_offset", "window"} <= set(members)
    assert ("chunk" in members) == hasattr(mask_lib, "ChunkedCausalMask") and "block_sparse" not in members
    assert contract.resolve("pallas_splash").capabilities.mask_families == (("computable", members),)

    class Old:  # a mask module without _ComputableMask: no family
        CausalMask = LocalMask = object

    assert computable(Old) == ()


def test_features_an_earlier_best_could_not_lose_are_left_out_last():
    # A smoke case of nine features spent the ci shrink budget (20 runs) on its trigger: each round tried the
    # features it needs (sorted first) before the one it could lose. Tried last, a round costs one run.
    from harness.core import contract, features
    from harness.core.case import Case
    from harness.running.signatures import reductions

    splash = contract.resolve("pallas_splash")
    case = Case(batch=1, q_heads=2, kv_heads=1, q_len=128, kv_len=128, head_dim=64, soft_cap=5.0, sinks=True)
    have = features.of(case, splash) - plain(splash)
    order = [f for f, _, _ in reductions(case, have, splash)]
    assert order == sorted(have)
    last = frozenset({"heads:gqa"})
    assert [f for f, _, _ in reductions(case, have, splash, last)] == [*sorted(have - last), "heads:gqa"]


def test_a_mask_familys_member_is_swapped_for_another_that_masks_the_case_otherwise():
    # The planted splash_fwd_window_off_by_one moves the key offset of splash's mask function: every computable
    # mask is off by one. Shards shrank it to a window, a chunk, a causal mask: six files. A member left out is
    # swapped for another on the same shapes and data; the family left out leaves no member.
    from harness.core import contract, features
    from harness.core.case import Case
    from harness.core.masks import Chunk, Segments, Window
    from harness.running.signatures import reductions, trigger, without

    splash = contract.resolve("pallas_splash")
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, seed=3)
    window = case.replace(mask=Mask(window=Window(7, 1)))
    have = features.of(window, splash) - plain(splash)
    got = {f: (c.mask, edited) for f, c, edited in reductions(window, have, splash)}
    assert got == {"mask:computable": (Mask(), True), "mask:window": (Mask(causal="top_left"), True)}
    # Causal top-left at equal lengths: bottom-right would mask it the same; the next member is a window.
    causal = case.replace(mask=Mask(causal="top_left"))
    swapped = without(causal, "mask:causal_top_left", splash)
    assert swapped.mask.components == {"window"} and (swapped.q_len, swapped.seed) == (128, 3)
    bottom_right = causal.replace(kv_len=256, mask=Mask(causal="bottom_right"))
    assert without(bottom_right, "mask:causal_bottom_right", splash).mask == Mask(causal="top_left")
    assert without(case.replace(mask=Mask(chunk=Chunk(64))), "mask:chunk", splash).mask == Mask(causal="top_left")
    # Where another member stays, the member is simply taken away (no swap: the family is still there).
    two = window.replace(mask=Mask(causal="top_left", window=Window(None, 0, offset=3)))
    assert without(two, "mask:causal_offset", splash).mask == Mask(causal="top_left")
    assert without(two, "mask:causal_top_left", splash).mask == Mask(window=Window(None, 0, offset=3))
    # Per head, only the member named: the planted splash_soft_cap_after_mask's smoke case (bottom-right and
    # top-left causal heads, a chunk head, a window over all) lost both causal kinds at once, and no member could
    # go: its trigger held all five, two files.
    heads = (Mask(causal="bottom_right"), Mask(chunk=Chunk(1)), Mask(causal="top_left"), Mask())
    per_head = case.replace(q_heads=4, kv_heads=4, mask=Mask(window=Window(127, None), heads=heads))
    bare = (Mask(), Mask(chunk=Chunk(1)), Mask(causal="top_left"), Mask())
    assert without(per_head, "mask:causal_bottom_right", splash).mask == Mask(window=Window(127, None), heads=bare)
    assert without(per_head, "mask:window", splash).mask == Mask(heads=heads)
    # A component outside the family is taken away as before.
    runs = (((0, 64), (1, 64)),)
    segments = window.replace(mask=Mask(window=Window(7, 1), segments=Segments(q=runs, kv=runs)))
    assert without(segments, "mask:segments", splash).mask == Mask(window=Window(7, 1))
    assert without(segments, "mask:window", splash).mask == Mask(causal="top_left", segments=Segments(q=runs, kv=runs))
    assert trigger(frozenset({"mask:window"}), {"mask:window"}, splash) == ("mask:computable",)
    assert trigger(frozenset({"mask:window"}), set(), splash) == ("mask:window",)


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


def test_the_smallest_case_with_exactly_a_trigger_is_found():
    # The trigger search's last candidate: flash's smallest causal case (asked for exactly, it was never drawn).
    from harness.core import features
    from harness.running.signatures import smallest_with

    flash = _flash()
    case = smallest_with(("mask:causal_top_left",), flash)
    assert case is not None and features.of(case, flash) - plain(flash) == {"mask:causal_top_left"}
    assert (case.batch, case.q_heads, case.kv_heads, case.q_len, case.kv_len) == (1, 1, 1, 128, 128)
    # Flash's smallest with several key tiles has query tiles too: none (the search keeps its best).
    assert smallest_with(("tiling:several_key_tiles",), flash) is None


def test_least_shapes_keep_the_features_lengths_and_tiles():
    # Where no smallest case has exactly a trigger (flash's several key tiles come with query tiles), the best
    # is tried in one batch row, one head and the least head_dim: the planted fwd_rescale_alpha's best had
    # grown to B=2 H=4 L=512 D=256, past the first failure it was reduced from.
    from harness.core import features
    from harness.core.case import Case
    from harness.running.signatures import least_shapes
    from kernels.pallas_flash import uniform_blocks

    flash = _flash()
    big = Case(batch=2, q_heads=4, kv_heads=4, q_len=512, kv_len=512, head_dim=256, blocks=uniform_blocks(), seed=3)
    small = least_shapes(big, flash)
    assert (small.batch, small.q_heads, small.kv_heads, small.head_dim) == (1, 1, 1, 32)
    assert (small.q_len, small.kv_len, small.blocks, small.seed) == (512, 512, big.blocks, 3)
    assert features.of(small, flash) == features.of(big, flash)
    assert least_shapes(small, flash) is None  # already least
    # Flash tiles the batch too: block_b=2 keeps two batch rows (upstream: "block_b=2 should be smaller or
    # equal to batch=1", a check the adapter's violations lacked until the trigger search met it).
    batched = big.replace(blocks=uniform_blocks() | {"block_b": 2})
    assert (least_shapes(batched, flash).batch, least_shapes(batched, flash).q_heads) == (2, 1)
    gqa = big.replace(kv_heads=2)  # one head would lose grouped heads: a feature, so no candidate
    assert least_shapes(gqa, flash) is None
