import dataclasses
import hashlib
import importlib
import json

import ml_dtypes
import numpy as np
import pytest

from harness.core import contract
from harness.core.case import CASE_DTYPES
from harness.core.compare import (
    IMPLEMENTATION_FACTORS,
    TOLERANCE_VERSION,
    TOLERANCES,
    Comparison,
    Tolerance,
    check_empty_rows,
    compare,
    exact_zero,
    oracle_multiple,
    tolerance,
)
from harness.core.contract import QUANTITIES

RNG = np.random.default_rng(0)
TRUTH = RNG.standard_normal((2, 3, 16, 8))
TOL = Tolerance(factor=2.0, floor=1e-5)


def rounded(a, dtype):
    return a.astype(dtype).astype(np.float64)


def test_every_dtype_and_quantity_has_a_tolerance():
    assert {(d, q) for d in CASE_DTYPES for q in QUANTITIES} == set(TOLERANCES)
    assert tolerance("float32", "out[empty]") == tolerance("float32", "out")


# By name: the package attribute `harness.core.compare` may be rebound to the function of that name.
compare_module = importlib.import_module("harness.core.compare")

# The values docs/tolerance.md documents: output factor 2, gradient factor 3,
# floors float32 1e-5, bfloat16 1e-3, float16 1e-4, float64 2e-14; the logsumexp as the output.
DOCUMENTED_FACTORS = {"out": 2.0, "dq": 3.0, "dk": 3.0, "dv": 3.0, "dbias": 3.0, "lse": 2.0, "dsinks": 3.0}
DOCUMENTED_FLOORS = {"float32": 1e-5, "bfloat16": 1e-3, "float16": 1e-4, "float64": 2e-14}
# TOLERANCE_VERSION -> fingerprint of every table in harness/core/compare.py. Each record and
# failure file carries the version, and `repro` warns when it differs, so a change of contents
# under an old version would replay old failures under new rules without a word.
FINGERPRINTS = {1: "d96a9f4e2b722380", 2: "934da45d0b54bf8a", 3: "e6042af7e1a38543", 4: "b751f86cdc43b049"}
# Per-implementation factors, each set from a measurement cited beside it in harness/core/compare.py.
DOCUMENTED_IMPLEMENTATION_FACTORS = {("torch_sdpa", "float32", "out"): 32.0}


def _canonical(value):
    if isinstance(value, Tolerance):
        return ["Tolerance", *(repr(float(x)) for x in dataclasses.astuple(value))]
    if isinstance(value, dict):
        return sorted([repr(k), _canonical(v)] for k, v in value.items())
    return repr(value)


def _is_data(value) -> bool:
    """A number, a Tolerance, or a non-empty table of them (not a registry of functions)."""
    if isinstance(value, dict):
        return bool(value) and all(_is_data(v) for v in value.values())
    return isinstance(value, Tolerance | float | int | str) and not isinstance(value, bool)


def tolerance_fingerprint() -> str:
    """A hash of every module-level table and number in harness/core/compare.py but the version itself.

    Covers TOLERANCES, the floors and factors it is built from, EPS, and any table added later
    (a per-implementation entry, say): adding one changes the fingerprint too.
    """
    tables = {
        name: _canonical(value)
        for name, value in vars(compare_module).items()
        if not name.startswith("__")
        and name != "TOLERANCE_VERSION"
        and not isinstance(value, str)  # module strings are documentation, not tolerances
        and _is_data(value)
    }
    return hashlib.sha256(json.dumps(tables, sort_keys=True).encode()).hexdigest()[:16]


def test_factors_and_floors_are_the_documented_values():
    for (dtype, quantity), tol in TOLERANCES.items():
        assert tol == Tolerance(DOCUMENTED_FACTORS[quantity], DOCUMENTED_FLOORS[dtype]), (dtype, quantity)


def test_per_implementation_factors_are_the_documented_values():
    assert IMPLEMENTATION_FACTORS == DOCUMENTED_IMPLEMENTATION_FACTORS
    # Only oracles carry one: a kernel's tolerance is the table's, never loosened per kernel.
    assert {name for name, _, _ in IMPLEMENTATION_FACTORS} <= set(contract.names("oracle"))


def test_tolerance_version_is_tied_to_the_table_contents():
    got = tolerance_fingerprint()
    assert FINGERPRINTS.get(TOLERANCE_VERSION) == got, (
        f"the tolerance tables in harness/core/compare.py (fingerprint {got}) differ from those of "
        f"TOLERANCE_VERSION={TOLERANCE_VERSION} ({FINGERPRINTS.get(TOLERANCE_VERSION)}). A deliberate change "
        f"(new values, or a new entry such as a per-implementation tolerance) must bump TOLERANCE_VERSION "
        f"to {max(FINGERPRINTS) + 1}, add {{{max(FINGERPRINTS) + 1}: {got!r}}} to FINGERPRINTS here, "
        f"and update docs/tolerance.md and DOCUMENTED_* above."
    )


def test_bound_is_factor_times_oracle_error_plus_floor_times_magnitude():
    oracle = TRUTH + 1e-3
    got = TRUTH + 2e-3
    c = compare("out", got, TRUTH, oracle, TOL, magnitude=10.0)
    assert c.oracle_abs == pytest.approx(1e-3)
    assert c.bound == pytest.approx(2 * 1e-3 + 1e-5 * 10.0)
    assert c.max_abs == pytest.approx(2e-3)
    assert c.ratio == pytest.approx(2.0)
    assert c.max_rel == pytest.approx(2e-3 / np.abs(TRUTH).max())
    assert c.passed


def test_just_past_the_bound_fails():
    oracle = TRUTH + 1e-3
    c = compare("out", TRUTH + 2.1e-3, TRUTH, oracle, TOL)
    assert not c.passed and c.max_abs > c.bound


def test_float32_kernel_with_bfloat16_precision_fails():
    # The rule's purpose: a float32 kernel that silently computes in bfloat16 must fail.
    oracle = rounded(TRUTH, np.float32)
    assert compare("out", rounded(TRUTH, np.float32), TRUTH, oracle, tolerance("float32", "out")).passed
    lossy = compare("out", rounded(TRUTH, ml_dtypes.bfloat16), TRUTH, oracle, tolerance("float32", "out"))
    assert not lossy.passed
    assert lossy.ratio > 1000


def test_float64_kernel_with_float32_precision_fails():
    # The float64 floor's purpose: a float64 kernel that computes anything in float32 fails.
    oracle = TRUTH * (1 + 1e-16)
    assert compare("out", TRUTH * (1 + 2e-16), TRUTH, oracle, tolerance("float64", "out")).passed
    lossy = compare("out", rounded(TRUTH, np.float32), TRUTH, oracle, tolerance("float64", "out"))
    assert not lossy.passed


def test_a_kernel_as_good_as_the_oracle_passes_in_every_dtype():
    for dtype, np_dtype in (("float32", np.float32), ("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16)):
        oracle = rounded(TRUTH, np_dtype)
        got = rounded(TRUTH * (1 + 1e-9), np_dtype)
        for q in QUANTITIES:
            assert compare(q, got, TRUTH, oracle, tolerance(dtype, q)).passed, (dtype, q)


def test_cancelled_truth_uses_the_magnitude_floor():
    # dq is exactly 0 when a query sees one key; every kernel still rounds terms of size ~1.
    zero = np.zeros((4, 4))
    noise = zero + 1e-7
    assert not compare("dq", noise, zero, zero, tolerance("float32", "dq")).passed
    assert compare("dq", noise, zero, zero, tolerance("float32", "dq"), magnitude=1.0).passed


def test_rows_select_what_is_compared():
    got = TRUTH.copy()
    rows = np.ones(TRUTH.shape[:-1], bool)
    rows[0, 0, 0] = False
    got[0, 0, 0] = 1e6
    assert not compare("out", got, TRUTH, TRUTH, TOL).passed
    assert compare("out", got, TRUTH, TRUTH, TOL, rows=rows).passed


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_where_truth_is_finite_fails(bad):
    got = TRUTH.copy()
    got[1, 2, 3, 4] = bad
    c = compare("dk", got, TRUTH, TRUTH, TOL)
    assert not c.passed and "1 non-finite" in c.note


def test_shape_mismatch_and_missing_fail_with_a_note():
    assert "shape" in compare("dq", TRUTH[:1], TRUTH, TRUTH, TOL).note
    missing = compare("dbias", None, TRUTH, TRUTH, TOL)
    assert not missing.passed and missing.note == "not computed"


def test_comparison_json_round_trip_keeps_infinities():
    c = compare("dk", TRUTH + np.inf, TRUTH, TRUTH, TOL)
    assert Comparison.from_json(c.to_json()).max_abs == np.inf
    c2 = compare("out", TRUTH, TRUTH, TRUTH + 1e-3, TOL)
    assert Comparison.from_json(c2.to_json()) == c2


# Empty rows: [B=1, H=1, Lq=3, D=2]; row 1 sees no key.
VALUES = np.array([[[[1.0, -2.0], [3.0, 4.0]]]])  # [1, 1, Lk=2, D=2]
EMPTY = np.array([[[False, True, False]]])


def out_with(row):
    out = np.zeros((1, 1, 3, 2))
    out[0, 0, 1] = row
    return out


@pytest.mark.parametrize(
    ("convention", "row", "passed"),
    [
        ("zeros", [0.0, 0.0], True),
        ("zeros", [2.0, 1.0], False),
        ("uniform", [2.0, 1.0], True),
        ("uniform", [0.0, 0.0], False),
        ("convex", [1.5, 3.9], True),
        ("convex", [3.5, 0.0], False),  # outside the values' range in column 0
        ("nan", [np.nan, np.nan], True),
        ("nan", [0.0, 0.0], False),
        ("uniform", [np.nan, 1.0], False),
        ("zeros", [np.inf, 0.0], False),
    ],
)
def test_empty_rows_are_checked_as_declared(convention, row, passed):
    c = check_empty_rows(convention, out_with(row), VALUES, EMPTY, "float32")
    assert c.passed is passed
    assert c.quantity == "out[empty]" and convention in c.note


def test_unknown_convention_is_an_error():
    with pytest.raises(ValueError, match="unknown empty-row convention"):
        check_empty_rows("mean", out_with([0, 0]), VALUES, EMPTY, "float32")


# Two empty rows (1 and 2) for the per-row convention nan_or_convex.
TWO_EMPTY = np.array([[[False, True, True]]])


@pytest.mark.parametrize(
    ("row1", "row2", "passed"),
    [
        ([np.nan, np.nan], [1.5, 3.9], True),  # one 0/0 row, one average of visited values
        ([np.nan, np.nan], [np.nan, np.nan], True),
        ([1.0, -2.0], [3.0, 4.0], True),
        ([np.nan, 0.0], [1.5, 3.9], False),  # half NaN is neither
        ([np.nan, np.nan], [3.5, 0.0], False),  # outside the values' range
        ([np.inf, 0.0], [1.5, 3.9], False),
    ],
)
def test_nan_or_convex_is_judged_row_by_row(row1, row2, passed):
    out = np.zeros((1, 1, 3, 2))
    out[0, 0, 1], out[0, 0, 2] = row1, row2
    c = check_empty_rows("nan_or_convex", out, VALUES, TWO_EMPTY, "float32")
    assert c.passed is passed
    assert c.note.startswith("2 rows (") and "declared nan_or_convex" in c.note


def test_comparison_json_is_strict_json():
    # JSON has no inf or NaN: a record with them must still be read by any JSON reader.
    c = compare("dk", TRUTH + np.inf, TRUTH, TRUTH, TOL)
    missing = compare("dq", None, TRUTH, TRUTH, TOL)
    for comp in (c, missing):
        doc = json.loads(json.dumps(comp.to_json(), allow_nan=False))
        back = Comparison.from_json(doc)
        assert np.isinf(back.max_abs) and np.isinf(back.ratio)
    assert missing.to_json()["bound"] == "nan" and c.to_json()["max_abs"] == "inf"
    assert isinstance(c.to_json()["oracle_abs"], float)  # finite numbers stay numbers


F32_EMPTY_BOUND = 2 * float(np.finfo(np.float32).eps) + 1e-5  # declared value, exact up to 2 eps, plus the floor


def _assert_same(got: Comparison, want: Comparison) -> None:
    for f in dataclasses.fields(Comparison):
        x, y = getattr(got, f.name), getattr(want, f.name)
        assert x == (pytest.approx(y, rel=1e-12) if isinstance(y, float) else y), (f.name, x, y)


@pytest.mark.parametrize("size", [1.0, 1 / 8])  # value scale 4, then 0.5: the bound scales with max(scale, 1)
@pytest.mark.parametrize(
    ("convention", "row", "fields"),
    [
        # (max_abs, max_rel, passed, note); oracle_abs and ratio are 0: no oracle has a convention
        ("nan", [np.nan, np.nan], (0.0, 0.0, True, "1 rows, declared nan")),
        ("nan", [0.0, 0.0], (np.inf, 0.0, False, "1 rows, declared nan")),
        ("zeros", [np.inf, 0.0], (np.inf, np.inf, False, "1 rows, declared zeros, got non-finite")),
        ("zeros", [0.0, 0.0], (0.0, 0.0, True, "1 rows, declared zeros")),
        ("zeros", [-1.0, 0.5], (1.0, 1 / 4, False, "1 rows, declared zeros")),  # max_rel: err / max|values|
    ],
)
def test_empty_row_comparisons_in_full(convention, row, fields, size):
    max_abs, max_rel, passed, note = fields
    got = check_empty_rows(convention, out_with(np.array(row) * size), VALUES * size, EMPTY, "float32")
    bound = 0.0 if convention == "nan" else F32_EMPTY_BOUND * max(4.0 * size, 1.0)
    ratio = np.inf if "non-finite" in note else 0.0
    scaled = max_abs * size if convention == "zeros" else max_abs
    _assert_same(
        got,
        Comparison(
            quantity="out[empty]",
            max_abs=scaled,
            max_rel=max_rel,
            oracle_abs=0.0,
            ratio=ratio,
            bound=bound,
            passed=passed,
            note=note,
        ),
    )


def test_an_empty_row_exactly_at_the_bound_passes():
    bound = check_empty_rows("zeros", out_with([0.0, 0.0]), VALUES, EMPTY, "float32").bound
    c = check_empty_rows("zeros", out_with([bound, 0.0]), VALUES, EMPTY, "float32")
    assert c.max_abs == c.bound and c.passed


@pytest.mark.parametrize(
    ("row", "passed"),
    [
        ([0.5, 0.0], False),  # column 0 below its values' minimum (1), above the global minimum (-2)
        ([-3.0, 0.0], False),  # below every value
        ([1.0, -2.0], True),  # on the hull's corner
    ],
)
def test_convex_is_judged_per_column(row, passed):
    assert check_empty_rows("convex", out_with(row), VALUES, EMPTY, "float32").passed is passed


def test_empty_row_conventions_are_per_head():
    # Two heads with different value rows: each empty row is held to its own head's values.
    values = np.concatenate([VALUES, VALUES + 10], axis=1)  # [1, 2, Lk=2, D=2]
    empty = np.array([[[False, True, False], [False, True, False]]])
    out = np.zeros((1, 2, 3, 2))
    out[0, 0, 1], out[0, 1, 1] = [2.0, 1.0], [12.0, 11.0]  # each head's mean
    assert check_empty_rows("uniform", out, values, empty, "float32").passed
    assert check_empty_rows("convex", out, values, empty, "float32").passed
    out[0, 1, 1] = [2.0, 1.0]  # head 0's mean in head 1
    assert not check_empty_rows("uniform", out, values, empty, "float32").passed
    assert not check_empty_rows("convex", out, values, empty, "float32").passed


@pytest.mark.parametrize("convention", ["zeros", "nan_or_convex"])
def test_empty_rows_carry_the_row_sets_name(convention):
    # Padded query rows are checked as "out[padded]": every convention reports that name.
    c = check_empty_rows(convention, out_with([0.0, 0.0]), VALUES, EMPTY, "float32", quantity="out[padded]")
    assert c.quantity == "out[padded]"


def test_nan_or_convex_keeps_the_non_finite_note():
    out = np.zeros((1, 1, 3, 2))
    out[0, 0, 1], out[0, 0, 2] = [np.nan, np.nan], [np.inf, 0.0]
    c = check_empty_rows("nan_or_convex", out, VALUES, TWO_EMPTY, "float32")
    assert not c.passed and c.note == "2 rows (1 NaN), declared nan_or_convex, got non-finite"


def test_empty_rows_of_all_zero_values_have_a_relative_error_of_zero():
    # max|values| == 0: the relative error falls back to the absolute one, never 0/0.
    c = check_empty_rows("zeros", out_with([0.0, 0.0]), np.zeros_like(VALUES), EMPTY, "float32")
    assert c.passed and c.max_rel == 0.0
    c = check_empty_rows("zeros", out_with([1e-3, 0.0]), np.zeros_like(VALUES), EMPTY, "float32")
    assert not c.passed and c.max_rel == c.max_abs == 1e-3


@pytest.mark.parametrize(
    ("got", "note"),
    [(None, "not computed"), (TRUTH[:1], "shape (1, 3, 16, 8) != (2, 3, 16, 8)")],
)
def test_a_missing_or_misshapen_result_fails_in_every_field(got, note):
    c = compare("dq", got, TRUTH, TRUTH, TOL)
    assert (c.quantity, c.max_abs, c.max_rel, c.ratio, c.passed, c.note) == ("dq", np.inf, np.inf, np.inf, False, note)
    assert c.passed is False and np.isnan(c.oracle_abs) and np.isnan(c.bound)


def test_a_declared_implementation_factor_replaces_only_the_factor():
    sdpa = tolerance("float32", "out", "torch_sdpa")
    assert sdpa == Tolerance(factor=32.0, floor=TOLERANCES[("float32", "out")].floor)
    assert tolerance("float32", "out[empty]", "torch_sdpa") == sdpa  # a part of the output: the same tolerance
    for other in (("float32", "out", None), ("float32", "out", "pallas_flash"), ("float32", "dq", "torch_sdpa")):
        assert tolerance(*other) == TOLERANCES[other[:2]], other  # no entry: the table's tolerance


def test_a_non_finite_result_fails_in_full():
    got = TRUTH.copy()
    got[0, 0, 0, 0] = np.nan
    c = compare("dk", got, TRUTH, TRUTH + 1e-3, TOL)
    want = Comparison(
        quantity="dk",
        max_abs=np.inf,
        max_rel=np.inf,
        oracle_abs=1e-3,
        ratio=np.inf,
        bound=TOL.bound(1e-3, np.abs(TRUTH).max()),
        passed=False,
        note="",
    )
    _assert_same(dataclasses.replace(c, note=""), want)
    assert c.passed is False and c.note == "1 non-finite values where the truth is finite"


@pytest.mark.parametrize(("error", "ratio"), [(0.0, 0.0), (1.0, np.inf), (1e-9, np.inf)])
def test_against_an_exact_oracle_only_an_exact_result_has_a_finite_ratio(error, ratio):
    zero = np.zeros((2, 3))
    c = compare("out", zero + error, zero, zero, TOL)
    assert c.quantity == "out" and c.oracle_abs == 0.0 and c.ratio == ratio and c.max_abs == error


def test_the_relative_error_divides_by_a_truth_smaller_than_one():
    truth = np.full((2, 2), 0.5)
    c = compare("out", truth + 0.25, truth, truth, TOL)
    assert c.max_rel == 0.5


def test_an_error_exactly_at_the_bound_passes():
    # The rule is "at most factor x the oracle's error": equality passes (all values exact in binary).
    zero = np.zeros((2, 2))
    c = compare("out", zero + 0.5, zero, zero + 0.25, Tolerance(factor=2.0, floor=0.0))
    assert c.max_abs == c.bound == 0.5 and c.passed


def test_unwritten_rows_are_recorded_and_never_judged():
    for row in ([np.nan, 7.0], [1e30, -1e30]):  # whatever the buffer held
        c = check_empty_rows("unwritten", out_with(row), VALUES, EMPTY, "float32")
        _assert_same(
            c,
            Comparison(
                quantity="out[empty]",
                max_abs=0.0,
                max_rel=0.0,
                oracle_abs=0.0,
                ratio=0.0,
                bound=0.0,
                passed=True,
                note="1 rows, declared unwritten (not checked)",
            ),
        )


def test_a_multiple_of_the_oracles_error_is_given_only_where_that_error_is_above_the_floor():
    truth = np.linspace(-1.0, 1.0, 64).reshape(1, 1, 8, 8)
    # float32: the oracle about exact (1e-12) and the kernel well inside the floor's 1e-5: a pass whose ratio
    # (5e6) would read as an alarm. No multiple, only err/bound.
    c = compare("out", truth + 5e-6, truth, truth + 1e-12, tolerance("float32", "out"))
    assert c.passed and c.ratio > 1e6
    assert oracle_multiple(c, "float32") is None
    # bfloat16: the oracle's own rounding (4e-3) is above the floor term (1e-3 x 1): the multiple says something.
    c = compare("out", truth + 6e-3, truth, truth + 4e-3, tolerance("bfloat16", "out"))
    assert oracle_multiple(c, "bfloat16") == pytest.approx(1.5)
    # torch_sdpa's float32 output is held to 32x: its own factor takes the oracle's share out of the bound.
    tol = tolerance("float32", "out", "torch_sdpa")
    c = compare("out", truth + 3e-4, truth, truth + 2e-5, tol)
    assert oracle_multiple(c, "float32", "torch_sdpa") == pytest.approx(15.0)
    # Read with the standard factor of 2, 30x of the oracle's error would pass for floor, and the multiple vanish.
    assert oracle_multiple(c, "float32") is None


def test_an_exact_check_or_a_result_that_never_reached_the_oracle_has_no_multiple():
    assert oracle_multiple(exact_zero("races", 3.0, "races found"), "float32") is None
    missing = compare("dq", None, TRUTH, TRUTH, tolerance("float32", "dq"))
    assert oracle_multiple(missing, "float32") is None
