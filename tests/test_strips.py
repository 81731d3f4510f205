"""Text heat strips and the text mask: what the terminal summary, `repro` and `show` print."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.case import Case
from harness.core.locate import Strip, locate
from harness.core.masks import Mask, Window
from harness.core.strips import appendix, heat_char, mask_text, rows_per_char, strip_text, summary


@pytest.mark.parametrize(
    ("value", "nonfinite", "char"),
    [
        pytest.param(None, False, " ", id="not judged"),
        pytest.param(0.0, False, ".", id="exact"),
        pytest.param(0.5, False, ":", id="under the bound"),
        pytest.param(1.0, False, ":", id="at the bound passes"),
        pytest.param(1.01, False, "+", id="past the bound"),
        pytest.param(10.0, False, "#", id="ten times"),
        pytest.param(0.0, True, "X", id="non-finite wins"),
    ],
)
def test_heat_char(value, nonfinite, char):
    assert heat_char(value, nonfinite) == char


def _strip(values, *, stride=1, tile=None, nonfinite=()):
    return Strip(
        quantity="out",
        axis="query",
        length=len(values) * stride,
        stride=stride,
        bound=1.0,
        values=(tuple(values),),
        nonfinite=nonfinite,
        tile=tile,
    )


def test_a_strip_puts_a_bar_between_tiles_and_shows_each_groups_worst():
    s = _strip([0.0] * 4 + [0.5] * 3 + [20.0], tile=4)
    assert strip_text(s, 0, width=8) == "|....|:::#|"
    # Two rows per character: the max of each pair.
    assert strip_text(s, 0, width=4) == "|..|:#|"


def test_rows_per_char_keeps_tile_boundaries_on_characters():
    assert rows_per_char(256, 1, 128, 64) == 4
    assert rows_per_char(384, 1, 128, 64) == 8  # 6 would not divide 128
    assert rows_per_char(100, 1, None, 64) == 2


def test_summary_is_empty_without_located_errors_and_names_where_otherwise():
    assert summary(None) == "" and appendix(None) == ""
    got = np.zeros((1, 1, 8, 2))
    got[0, 0, 6:, 0] = 3.0
    loc = locate({"out": got}, {"out": np.zeros_like(got)}, {"out": 1.0}, blocks={"block_q": 4})
    text = summary(loc)
    assert "  out   h0  |....|..++|" in text
    assert "out: past the bound in 2 of 8 q rows (6-7), head 0; in query tile 1 of 0-1 (4 rows each)" in text
    assert appendix(loc) == "\n" + text


def test_mask_text_draws_tiles_and_marks_rows_that_see_no_key():
    # Causal with offset -2: queries 0 and 1 see no key.
    case = Case(
        batch=1, q_heads=1, kv_heads=1, q_len=8, kv_len=8, head_dim=4,
        mask=Mask(window=Window(left=None, right=0, offset=-2)), blocks={"block_q": 4, "block_k": 4},
    )  # fmt: skip
    lines = mask_text(case, height=8, width=8).splitlines()
    grid = [line for line in lines if line.startswith("  ") and not line.startswith("  every")]
    assert grid == [
        "  E     |    ",
        "  E     |    ",
        "    O   |    ",
        "    OO  |    ",
        "    ----+----",
        "    OOO |    ",
        "    OOOO|    ",
        "    OOOO|O   ",
        "    OOOO|OO  ",
    ]


def test_mask_text_draws_each_distinct_head_mask():
    heads = (Mask(causal="top_left"), Mask(), Mask(causal="top_left"))
    case = Case(batch=1, q_heads=3, kv_heads=1, q_len=4, kv_len=4, head_dim=4, mask=Mask(heads=heads))
    text = mask_text(case)
    assert "  heads 0,2" in text and "  heads 1" in text and "every head" not in text
