"""The one formatter of ratios and multiples (harness.core.numbers): three significant digits, scientific past 1e4."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core.numbers import multiple


def test_an_lse_error_of_2_38e38_over_an_oracle_error_of_5_6e_7_is_three_digits_not_forty_five() -> None:
    # The failure table once printed this ratio as 421978413981571283952974101091304167138394112.00.
    assert multiple(2.38e38 / 5.6e-7) == "4.25e44"


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (0.0, "0"),
        (0.26, "0.260"),
        (1.0, "1.00"),
        (9.996, "10.0"),  # the carry picks the form: three digits still
        (12.34, "12.3"),
        (123.4, "123"),
        (1234.4, "1234"),  # a whole number keeps its digits below 1e4
        (9999.4, "9999"),
        (9999.7, "1.00e4"),
        (12345.0, "1.23e4"),
        (805306368.0, "8.05e8"),
        (0.00123, "0.00123"),
        (0.000123, "1.23e-4"),
        (-3.14159, "-3.14"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (math.nan, "nan"),
    ],
)
def test_values_across_the_range(x: float, text: str) -> None:
    assert multiple(x) == text


# Up to 1e308: three digits of the largest floats (1.795e308 -> "1.80e308") read back past the largest float.
@given(st.floats(min_value=-1e308, max_value=1e308))
def test_every_finite_number_reads_back_within_its_three_digits_and_stays_short(x: float) -> None:
    text = multiple(x)
    assert float(text) == pytest.approx(x, rel=5e-3, abs=0.0) or x == 0
    # Fixed point only between 1e-3 and 1e4; otherwise a mantissa of three digits and an exponent.
    assert len(text) <= len("-1.00e-308"), text
    assert ("e" in text) == (x != 0 and not 1e-3 <= abs(float(text)) < 1e4), text
