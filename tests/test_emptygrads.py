"""The gradient of rows that see no key (harness.core.emptygrads): the uniform rows' formula against autodiff of
the natural implementations in float64, the cotangent rule, and which rows are judged."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harness.core import contract, emptygrads, reference
from harness.core.case import Case
from harness.core.inputs import empty_cotangent, make_inputs
from harness.core.masks import Lengths, Mask, Segments
from harness.running.runner import run_case
from harness.runtime import compat

# float32's finfo.min: absorbed by float64 logits of ordinary size (its ulp is ~4e22), as by float32's.
FILL = float(np.finfo(np.float32).min)
# Query row 0 and 1 see keys of segment 0; rows 2 and 3 (segment 1) see none; rows 4 to 7 see segment 2.
SEGMENTS = Segments(q=(((0, 2), (1, 2), (2, 4)),), kv=(((0, 3), (2, 5)),))


def _case(**kw) -> Case:
    base = dict(batch=1, q_heads=4, kv_heads=2, q_len=8, kv_len=8, head_dim=16, mask=Mask(segments=SEGMENTS), seed=1)
    return Case(**(base | kw))


def _natural(fill: str):
    """softmax(Q K^T * scale + bias, with the finite FILL on hidden keys) V, the fill added or replacing."""

    def f(q, k, v, bias, visible, scale):
        group = q.shape[1] // k.shape[1]
        k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * scale + bias
        s = s + jnp.where(visible, 0.0, FILL) if fill == "added" else jnp.where(visible, s, FILL)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    return f


@pytest.mark.parametrize("fill", emptygrads.FILLS)
def test_uniform_rows_gradient_is_autodiff_of_a_finite_fill(fill: str) -> None:
    case = _case(bias=True)
    inputs = make_inputs(case)
    assert inputs.empty.any() and inputs.dout[inputs.empty].any()  # an odd seed: the rows have a cotangent
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    with compat.enable_x64():
        args = [jnp.asarray(f64(a)) for a in (inputs.q, inputs.k, inputs.v, inputs.bias)]
        out, vjp = jax.vjp(lambda *a: _natural(fill)(*a, inputs.visible, case.sm_scale), *args)
        want = dict(zip(("dq", "dk", "dv", "dbias"), (f64(g) for g in vjp(jnp.asarray(f64(inputs.dout)))), strict=True))
    # The forward the convention declares: every value row's plain average on the empty rows.
    values = np.repeat(f64(inputs.v), 2, axis=1).mean(axis=2, keepdims=True)
    np.testing.assert_allclose(f64(out)[inputs.empty], np.broadcast_to(values, out.shape)[inputs.empty], atol=1e-12)
    truth = reference.truth(case, emptygrads.without_cotangent(inputs), grads=True)
    added = emptygrads.uniform(case, inputs, inputs.empty, fill=fill)
    for q, got in want.items():
        np.testing.assert_allclose(truth.get(q) + added[q], got, atol=1e-12, err_msg=q)
    if fill == "replaced":
        assert not any(added[q].any() for q in ("dq", "dk", "dbias")) and added["dv"].any()


def test_the_cotangent_changes_no_draw() -> None:
    """Odd seeds give the rows that see no key a cotangent; every other bit is the same as with it off."""
    on, off = make_inputs(_case(seed=3)), make_inputs(_case(seed=3, batch=1))
    assert empty_cotangent(_case(seed=3)) and not empty_cotangent(_case(seed=4))
    assert on.dout[on.empty].any() and not make_inputs(_case(seed=4)).dout[make_inputs(_case(seed=4)).empty].any()
    np.testing.assert_array_equal(on.dout[~on.empty], off.dout[~off.empty])
    plain = make_inputs(_case(seed=3, mask=Mask()))  # no row without a key: the inputs as before
    assert not plain.empty.any() and plain.dout.all()
    zeroed = emptygrads.without_cotangent(on)
    np.testing.assert_array_equal(zeroed.dout[~on.empty], on.dout[~on.empty])
    assert not zeroed.dout[on.empty].any()


@pytest.mark.parametrize(
    ("convention", "kw", "fill", "refused"),
    [
        pytest.param("zeros", {}, None, None, id="zeros"),
        pytest.param("uniform", {}, "added", None, id="uniform"),
        pytest.param("uniform", {}, None, "declares no fill", id="uniform-no-fill"),
        pytest.param("uniform", {}, "why not", "why not", id="uniform-refused-by-kernel"),
        pytest.param("uniform", {"soft_cap": 5.0}, "added", "soft cap", id="uniform-soft-cap"),
        pytest.param("uniform", {"sinks": True}, "added", "sinks", id="uniform-sinks"),
        pytest.param("convex", {}, "added", "gradient undefined", id="convex"),
        pytest.param("nan", {}, None, "gradient undefined", id="nan"),
        pytest.param("nan_or_convex", {}, None, "gradient undefined", id="nan_or_convex"),
        pytest.param("unwritten", {}, None, "gradient undefined", id="unwritten"),
    ],
)
def test_which_rows_are_judged(convention: str, kw: dict, fill: str | None, refused: str | None) -> None:
    got = emptygrads.refusal(convention, _case(**kw), fill)
    assert got is None if refused is None else refused in got


def test_padded_rows_are_a_set_of_their_own_and_keep_their_cotangent_apart() -> None:
    """Padded query rows declared zeros keep their cotangent while other empty rows declared convex lose it."""
    mask = Mask(segments=SEGMENTS, lengths=Lengths(q=(6,)))
    case = _case(mask=mask, q_heads=2, kv_heads=2)
    inputs = make_inputs(case)
    sets = emptygrads.row_sets(case, inputs.empty, {"empty": ("convex", None), "padded": ("zeros", None)})
    assert [(s.quantity, s.judged) for s in sets] == [("out[empty]", False), ("out[padded]", True)]
    mine = emptygrads.cotangent(inputs, sets)
    assert not mine.dout[sets[0].rows].any() and mine.dout[sets[1].rows].all()
    assert all(getattr(mine, f.name) is getattr(inputs, f.name) for f in dataclasses.fields(inputs) if f.name != "dout")


def test_a_backward_that_skips_rows_with_no_key_fails_and_says_so() -> None:
    # Batch row 0 has no valid key: uniform rows (jax_xla's fill replaces the logits, so dv alone is theirs).
    case = Case(batch=2, q_heads=2, kv_heads=2, q_len=8, kv_len=8, head_dim=16, mask=Mask(lengths=Lengths(kv=(0, 5))))
    case = case if empty_cotangent(case) else case.replace(seed=case.seed + 1)
    upstream = run_case(case, [contract.resolve("jax_xla")]).subjects[0]
    assert upstream.passed, upstream.failure
    planted = contract.resolve("jax_xla=tests.fixtures.emptyrows:NN_KV_LENGTH_0_DETACHED")
    subject = run_case(case, [planted]).subjects[0]
    bad = {c.quantity: c.note for c in subject.comparisons if not c.passed}
    assert set(bad) == {"dv"}, bad
    assert f"{emptygrads.ALONE}: 0x their declared value's gradient" in bad["dv"]
