"""How a ratio or a multiple is written, everywhere one is shown: the terminal, the failure file, the report.

One formatter so that a run's summary, its failure tables and its report print the same number the same
way: three significant digits, scientific past 1e4 (and below 1e-3), `inf`/`nan` as such. A ratio of
2.38e38 over 5.6e-7 is "4.25e44", never a 45-digit fixed-point string.
"""

from __future__ import annotations

import math

# Past these a fixed-point number stops being readable at a glance: 12345.67 or 0.000123.
SCIENTIFIC_ABOVE = 1e4
SCIENTIFIC_BELOW = 1e-3
DIGITS = 3


def multiple(x: float) -> str:
    """`x` (an error/bound, a multiple of an oracle's error, a ratio) in three significant digits:
    0.26 -> "0.260", 1 -> "1.00", 123.4 -> "123", 1234.4 -> "1234" (a whole number keeps its digits),
    2.38e38 / 5.6e-7 -> "4.25e44", 1.5e-5 -> "1.50e-5", inf -> "inf"."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    # A whole number keeps all its digits below 1e4 (1234.4 is "1234", not "1.23e3" or "1230"); the decimals are
    # counted on the number rounded to three digits, so that a carry (9.996 -> 10.0) still shows three.
    size, rounded = abs(x), abs(float(f"{x:.{DIGITS - 1}e}"))
    if 1 <= size < SCIENTIFIC_ABOVE:
        text = f"{x:.{max(0, DIGITS - len(str(int(max(size, rounded)))))}f}"
        if abs(float(text)) < SCIENTIFIC_ABOVE:  # 9999.7 rounds to "10000": past 1e4, so scientific
            return text
    if rounded >= SCIENTIFIC_ABOVE or rounded < SCIENTIFIC_BELOW:
        mantissa, _, exponent = f"{x:.{DIGITS - 1}e}".partition("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{x:.{DIGITS - 1 - math.floor(math.log10(rounded))}f}"


def duration(seconds: float) -> str:
    """m:ss, or h:mm:ss from an hour on: how long a run has taken or has left, as its progress lines say it."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
