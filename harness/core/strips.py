"""Failure pictures as text: heat strips of located errors, and the mask drawn in characters. Pure.

One character stands for a run of rows; it shows the largest err/bound among them:

  .  under 0.1 of the bound     :  under the bound     +  past it, up to 10x
  #  10x the bound or more      X  a non-finite value  (space) not judged
  |  a tile boundary (the quantity's own pass's block size)

The mask (`mask_text`, for `show`) uses 'O' for a cell whose keys are all visible, 'o'
for some, blank for none, with the forward tiles drawn as '|' and '-' and the strips of
`out` and `dq` beside its rows and of `dk` and `dv` under its columns.
"""

from __future__ import annotations

import numpy as np

from harness.core.case import Case
from harness.core.locate import Located, Strip, tiling, where
from harness.core.masks import dense_mask
from harness.core.numbers import multiple

WIDTH = 64  # characters per strip in the terminal
HEIGHT = 32  # mask rows drawn by `show`
LEGEND = "err/bound per row: . <0.1  : <1  + past the bound  # >=10x  X non-finite  (blank) not judged  | tile"


def heat_char(value: float | None, nonfinite: bool = False) -> str:
    if nonfinite:
        return "X"
    if value is None:
        return " "
    if value < 0.1:
        return "."
    if value <= 1:
        return ":"
    return "+" if value < 10 else "#"


def rows_per_char(length: int, stride: int, tile: int | None, width: int) -> int:
    """Rows one character stands for: a multiple of the stride, few enough characters, tiles aligned if possible."""
    n = -(-length // stride)
    per = stride * -(-n // width)
    if tile and tile >= per:
        # The smallest multiple of `per` (hence of stride) that divides the tile keeps '|' on boundaries.
        for k in range(per, tile + 1, stride):
            if tile % k == 0:
                return k
    return per


def _chars(strip: Strip, head: int, rows: int) -> list[tuple[int, str]]:
    """(first row, character) per character of one head's strip."""
    per = rows // strip.stride
    bad = {c for h, c, _ in strip.nonfinite if h == head}
    vals = strip.values[head]
    out = []
    for start in range(0, len(vals), per):
        group = [v for v in vals[start : start + per] if v is not None]
        nonfinite = any(c in bad for c in range(start, start + per))
        out.append((start * strip.stride, heat_char(max(group) if group else None, nonfinite)))
    return out


def strip_text(strip: Strip, head: int, *, width: int = WIDTH) -> str:
    """One head of one quantity as a bar of characters, '|' between tiles."""
    rows = rows_per_char(strip.length, strip.stride, strip.tile, width)
    text = ""
    for first, ch in _chars(strip, head, rows):
        if strip.tile and first and first % strip.tile == 0 and strip.tile % rows == 0:
            text += "|"
        text += ch
    return f"|{text}|"


def summary(located: Located | None, *, width: int = WIDTH, max_heads: int = 4, indent: str = "    ") -> str:
    """The located errors in a few lines: one strip per quantity and head, then where each is past its bound.

    Empty when there is nothing located (a failure file written before locating existed, or an exception).
    """
    if located is None or not located.strips:
        return ""
    lines = [f"{indent}where the error sits (batch row {located.batch}); {LEGEND}"]
    for s in located.strips:
        rows = rows_per_char(s.length, s.stride, s.tile, width)
        axis = "q" if s.axis == "query" else "k"
        shown = range(min(s.heads, max_heads))
        for h in shown:
            lines.append(f"{indent}  {s.quantity:<5} h{h:<2} {strip_text(s, h, width=width)}")
        if s.heads > max_heads:
            lines.append(f"{indent}  {'':<5} ... {s.heads - max_heads} more heads (max over all: {multiple(s.worst)}x)")
        lines.append(f"{indent}        {axis} rows 0-{s.length - 1}, {rows} per character")
    lines += [f"{indent}  {where(s)}" for s in located.strips]
    return "\n".join(lines)


def _grid(length: int, limit: int, tile: int | None) -> int:
    """Rows per cell of the text mask: tiles aligned when they can be."""
    return rows_per_char(length, 1, tile, limit)


def mask_text(case: Case, located: Located | None = None, *, width: int = WIDTH, height: int = HEIGHT) -> str:
    """The mask of one batch row (the located one) for every distinct per-head mask, errors beside it."""
    batch = located.batch if located is not None else 0
    vis = dense_mask(case.mask, batch=case.batch, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len)[batch]
    t = tiling(case.block_dict, "fwd")
    rq = _grid(case.q_len, height, t.q)
    rk = _grid(case.kv_len, width, t.k)
    groups: list[tuple[list[int], np.ndarray]] = []
    for h in range(case.q_heads):
        for heads, m in groups:
            if np.array_equal(m, vis[h]):
                heads.append(h)
                break
        else:
            groups.append(([h], vis[h]))
    out = [
        f"case {case}",
        f"mask of batch row {batch}: 'O' every key visible, 'o' some, blank none; {rq} q rows x {rk} keys "
        "per character; E: a query row that sees no key"
        + (f"; forward tiles block_q={t.q}, block_k={t.k}" if t.q or t.k else ""),
    ]
    q_strips = [s for s in (located.strips if located else ()) if s.axis == "query" and not s.grid]
    k_strips = [s for s in (located.strips if located else ()) if s.axis == "key"]
    group_size = case.q_heads // case.kv_heads
    for heads, m in groups:
        label = "every head" if len(heads) == case.q_heads else "heads " + ",".join(map(str, heads))
        h0 = heads[0]
        out.append(f"  {label}" + "".join(f"   {s.quantity} h{h0}" for s in q_strips))
        k_cells = list(range(0, case.kv_len, rk))
        q_side = {s.quantity: dict(_chars(s, h0, rq)) for s in q_strips if rq % s.stride == 0}
        for r0 in range(0, case.q_len, rq):
            if t.q and r0 and r0 % t.q == 0 and t.q % rq == 0:
                out.append("    " + _k_line(k_cells, t.k, rk, "-", "+"))
            block = m[r0 : r0 + rq]
            empty = "E" if (~block.any(axis=1)).any() else " "
            row = _k_line(k_cells, t.k, rk, None, "|", lambda c, block=block: _cell(block[:, c : c + rk]))
            beside = "".join(f"   {q_side[s.quantity].get(r0, ' ')}" for s in q_strips if s.quantity in q_side)
            out.append(f"  {empty} {row}{beside}")
        for s in k_strips:
            for kv in sorted({h // group_size for h in heads}):
                if rk % s.stride == 0:
                    chars = dict(_chars(s, kv, rk))
                    line = _k_line(k_cells, s.tile, rk, None, "|", lambda c, chars=chars: chars.get(c, " "))
                    out.append(f"    {line}  {s.quantity} kv head {kv}")
    if located is not None:
        out.append(LEGEND)
        out += [where(s) for s in located.strips]
    return "\n".join(out)


def _k_line(cells: list[int], tile: int | None, per: int, fill: str | None, sep: str, draw=None) -> str:
    text = ""
    for c in cells:
        if tile and c and c % tile == 0 and tile % per == 0:
            text += sep
        text += fill if fill is not None else draw(c)
    return text


def _cell(block: np.ndarray) -> str:
    if block.size == 0 or not block.any():
        return " "
    return "O" if block.all() else "o"


def appendix(located: Located | None) -> str:
    """The summary as lines to add under an error table ("" when nothing is located)."""
    text = summary(located)
    return "\n" + text if text else ""
