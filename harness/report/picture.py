"""A failure's picture as inline SVG: the mask of which keys each query sees, the kernel's tiles
drawn over it, and beside it where the error sits (harness.core.locate), coloured against the bound.

No JavaScript and nothing to fetch; every piece of text is escaped here, since the result is
marked safe for the template. Drawn from a case's JSON and a Located, so the report draws it
from records and `show` from any case or failure file, never from live arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from markupsafe import Markup, escape

from harness.core.case import Case
from harness.core.locate import Located, Strip, tiling, where
from harness.core.masks import dense_mask
from harness.core.numbers import multiple

FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'
MASK_PX = 300  # the longer side of a mask panel
MAX_CELLS = 150  # mask cells per axis; longer axes are drawn in groups of rows (a cell's shade is its visible share)
STRIP_PX, STRIP_GAP, GROUP_GAP = 11, 3, 14
MIN_BAD_PX = 3.0  # a strip cell past the bound or non-finite is drawn at least this long
MAX_HEADS = 8  # strips per quantity and panel; the rest are summarised in a note
VISIBLE, EMPTY_ROW, UNSEEN_KEY = (74, 85, 104), "#c0392b", "#e67e22"
TILE, NONFINITE, UNJUDGED, INK, MUTED = "#1f6fb4", "#3d0a5c", "#d9d9d9", "#1f2328", "#5f6b76"
# err/bound colour scale, log10: under the bound light to mid blue, past it orange to dark red.
LOG_LO, LOG_HI = -3.0, 3.0
STEPS = 4  # shades per decade past the bound (one per decade under it)
_UNDER = ((240, 244, 248), (107, 154, 196))
_OVER = ((246, 170, 97), (128, 0, 0))


def _t(x: float) -> str:
    return f"{x:.1f}"


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], f: float) -> str:
    f = min(max(f, 0.0), 1.0)
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b, strict=True))


def colour(value: float | None, nonfinite: bool = False) -> str:
    """The fill of one err/bound value: blue shades under the bound (1), orange to red past it."""
    if nonfinite:
        return NONFINITE
    if value is None:
        return UNJUDGED
    # Whole decades under the bound, quarter decades past it: how far past is what a reader
    # compares; and equal neighbours merge into one rect, which keeps the markup small.
    steps = STEPS if value > 1 else 1
    x = math.ceil(max(math.log10(value), LOG_LO) * steps) / steps if value > 0 else LOG_LO
    if value <= 1:
        return _mix(*_UNDER, (x - LOG_LO) / -LOG_LO)
    return _mix(*_OVER, x / LOG_HI)


def _rect(x: float, y: float, w: float, h: float, fill: str, title: str = "", extra: str = "") -> str:
    tip = f"<title>{escape(title)}</title>" if title else ""
    end = f">{tip}</rect>" if tip else "/>"
    return (
        f'<rect x="{_t(x)}" y="{_t(y)}" width="{_t(max(w, 0.1))}" height="{_t(max(h, 0.1))}" fill="{fill}"{extra}{end}'
    )


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str, width: float, dash: str = "", cls: str = "") -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    d += f' class="{cls}"' if cls else ""
    return (
        f'<line x1="{_t(x1)}" y1="{_t(y1)}" x2="{_t(x2)}" y2="{_t(y2)}" stroke="{stroke}" stroke-width="{width}"{d}/>'
    )


def _text(
    x: float, y: float, s: str, *, anchor: str = "start", size: int = 11, fill: str = INK, extra: str = ""
) -> str:
    return (
        f'<text x="{_t(x)}" y="{_t(y)}" text-anchor="{anchor}" font-size="{size}" fill="{fill}"{extra}>'
        f"{escape(s)}</text>"
    )


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) runs of True."""
    out, start = [], None
    for i, f in enumerate(list(flags) + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            out.append((start, i))
            start = None
    return out


class _Panel:
    """Geometry of one mask panel: query rows down, keys across."""

    def __init__(self, x: float, y: float, q_len: int, kv_len: int) -> None:
        side = max(q_len, kv_len)
        self.x, self.y = x, y
        self.w, self.h = MASK_PX * kv_len / side, MASK_PX * q_len / side
        self.q_len, self.kv_len = q_len, kv_len

    def row(self, i: float) -> float:
        return self.y + self.h * i / self.q_len

    def col(self, j: float) -> float:
        return self.x + self.w * j / self.kv_len


def _mask_cells(p: _Panel, vis: np.ndarray) -> list[str]:
    rq, rk = -(-p.q_len // MAX_CELLS), -(-p.kv_len // MAX_CELLS)
    out = [_rect(p.x, p.y, p.w, p.h, "#ffffff", extra=f' stroke="{MUTED}" stroke-width="0.8"')]
    for r0 in range(0, p.q_len, rq):
        block = vis[r0 : r0 + rq]
        shares = [block[:, c : c + rk].mean() for c in range(0, p.kv_len, rk)]
        c = 0
        while c < len(shares):  # one rect per run of equal shade keeps the markup small
            e = c
            while e + 1 < len(shares) and shares[e + 1] == shares[c]:
                e += 1
            if shares[c] > 0:
                out.append(
                    _rect(
                        p.col(c * rk),
                        p.row(r0),
                        # +0.6 px: neighbours overlap, so rounding to whole pixels leaves no seam
                        p.col(min((e + 1) * rk, p.kv_len)) - p.col(c * rk) + 0.6,
                        p.row(min(r0 + rq, p.q_len)) - p.row(r0) + 0.6,
                        _mix((255, 255, 255), VISIBLE, float(shares[c])),
                    )
                )
            c = e + 1
    return out


def _tile_lines(p: _Panel, blocks: dict[str, int]) -> list[str]:
    """Forward tiles: dashed at minor tile boundaries, solid at major ones (every one when they coincide)."""
    t = tiling(blocks, "fwd")
    out = []
    for minor, major, n, across in ((t.q, t.q_major, p.q_len, True), (t.k, t.k_major, p.kv_len, False)):
        for i in range(minor, n, minor) if minor else ():
            solid = not major or i % major == 0
            w, dash = (1.4, "") if solid else (0.8, "4 3")
            cls = "tile major" if solid else "tile minor"
            if across:
                out.append(_line(p.x, p.row(i), p.x + p.w, p.row(i), TILE, w, dash, cls))
            else:
                out.append(_line(p.col(i), p.y, p.col(i), p.y + p.h, TILE, w, dash, cls))
    return out


def _axis_marks(p: _Panel, vis: np.ndarray, blocks: dict[str, int]) -> list[str]:
    out = []
    for a, b in _runs(~vis.any(axis=1)):
        out.append(_rect(p.x - 9, p.row(a), 6, p.row(b) - p.row(a), EMPTY_ROW, f"query rows {a}-{b - 1} see no key"))
    for a, b in _runs(~vis.any(axis=0)):
        out.append(
            _rect(p.col(a), p.y - 9, p.col(b) - p.col(a), 6, UNSEEN_KEY, f"keys {a}-{b - 1}: no query sees them")
        )
    t = tiling(blocks, "fwd")
    q_ticks = sorted({0, p.q_len} | (set(range(0, p.q_len, t.q)) if t.q and p.q_len // t.q <= 8 else set()))
    k_ticks = sorted({0, p.kv_len} | (set(range(0, p.kv_len, t.k)) if t.k and p.kv_len // t.k <= 8 else set()))
    out += [_text(p.x - 12, p.row(i) + 4, str(i), anchor="end", size=9, fill=MUTED) for i in q_ticks]
    out += [_text(p.col(j), p.y - 12, str(j), anchor="middle", size=9, fill=MUTED) for j in k_ticks]
    return out


def _strip_cells(strip: Strip, head: int, pos, along: str, at: float) -> list[str]:
    """One head's strip along rows pos(first)..pos(last); `at` is the strip's x (or y).

    Neighbouring cells of one shade are one rect (its tooltip gives the largest value); a cell
    past the bound or non-finite that would be under MIN_BAD_PX is widened and drawn on top.
    """
    bad = {c: n for h, c, n in strip.nonfinite if h == head}
    values = strip.values[head]
    runs: list[tuple[int, int, str]] = []  # [first cell, last cell], fill
    later: list[tuple[float, float, str, str]] = []
    for c, v in enumerate(values):
        fill = colour(v, c in bad)
        lo, hi = pos(c * strip.stride), pos(min((c + 1) * strip.stride, strip.length))
        if (c in bad or (v is not None and v > 1)) and hi - lo < MIN_BAD_PX:
            # One bad row in hundreds would be under a pixel: widen it so that it is seen.
            mid = (lo + hi) / 2
            later.append((mid - MIN_BAD_PX / 2, mid + MIN_BAD_PX / 2, fill, _label(strip, head, c, c, bad)))
        if runs and runs[-1][2] == fill and runs[-1][1] == c - 1 and c not in bad:
            runs[-1] = (runs[-1][0], c, fill)
        else:
            runs.append((c, c, fill))
    out: list[str] = []
    extra = ' shape-rendering="crispEdges"'
    for first, last, fill in runs:
        lo, hi = pos(first * strip.stride), pos(min((last + 1) * strip.stride, strip.length))
        label = _label(strip, head, first, last, bad)
        span = hi - lo + (0.6 if last < len(values) - 1 else 0.0)  # overlap the next run: no seam
        if along == "down":
            out.append(_rect(at, lo, STRIP_PX, span, fill, label, extra))
        else:
            out.append(_rect(lo, at, span, STRIP_PX, fill, label, extra))
    for lo, hi, fill, label in later:  # drawn last, over their neighbours
        if along == "down":
            out.append(_rect(at, lo, STRIP_PX, hi - lo, fill, label))
        else:
            out.append(_rect(lo, at, hi - lo, STRIP_PX, fill, label))
    if strip.tile:
        for i in range(strip.tile, strip.length, strip.tile):
            if along == "down":
                out.append(_line(at - 1, pos(i), at + STRIP_PX + 1, pos(i), INK, 1.0))
            else:
                out.append(_line(pos(i), at - 1, pos(i), at + STRIP_PX + 1, INK, 1.0))
    return out


def _label(strip: Strip, head: int, first: int, last: int, bad: dict[int, int]) -> str:
    a, b = first * strip.stride, min((last + 1) * strip.stride, strip.length) - 1
    where = f"{strip.quantity} head {head}, {'q' if strip.axis == 'query' else 'k'} rows {a}-{b}: "
    if first in bad:
        return where + f"{bad[first]} non-finite"
    vals = [v for v in strip.values[head][first : last + 1] if v is not None]
    if not vals:
        return where + "not judged"
    return where + ("up to " if last > first else "") + f"{multiple(max(vals))}x the bound"


def _legend(x: float, y: float) -> list[str]:
    w = 240
    out = [_text(x, y, "error / tolerance bound (log scale)", size=11, fill=INK)]
    steps = int((LOG_HI - LOG_LO) * STEPS)
    for i in range(steps):
        v = 10 ** (LOG_LO + (LOG_HI - LOG_LO) * (i + 0.5) / steps)
        out.append(_rect(x + w * i / steps, y + 6, w / steps + 0.3, 12, colour(v)))
    for e in range(int(LOG_LO), int(LOG_HI) + 1):
        xe = x + w * (e - LOG_LO) / (LOG_HI - LOG_LO)
        label = {0: "1 = bound", 1: "10", -1: "0.1"}.get(e, f"1e{e}")
        bold = ' font-weight="bold"' if e == 0 else ""
        out.append(_line(xe, y + 18, xe, y + 22, INK, 1))
        out.append(_text(xe, y + 32, label, anchor="middle", size=9, fill=INK if e == 0 else MUTED, extra=bold))
    xb = x + w / 2
    out.append(_line(xb, y + 3, xb, y + 21, "#b3261e", 2))
    sw = x + w + 18
    for i, (fill, label) in enumerate(
        (
            (NONFINITE, "non-finite"),
            (UNJUDGED, "not judged (empty row)"),
            (EMPTY_ROW, "query rows that see no key"),
            (UNSEEN_KEY, "keys no query sees"),
        )
    ):
        yy = y + 2 + 12 * i
        out.append(_rect(sw, yy, 10, 9, fill))
        out.append(_text(sw + 14, yy + 8, label, size=9, fill=MUTED))
    sx = sw + 180
    out.append(_rect(sx, y + 2, 10, 9, _mix((255, 255, 255), VISIBLE, 1.0)))
    out.append(_text(sx + 14, y + 10, "key visible (lighter: some in the cell)", size=9, fill=MUTED))
    out.append(_line(sx, y + 20, sx + 10, y + 20, TILE, 1.2, "4 3"))
    out.append(_text(sx + 14, y + 23, "tiles (solid: major tiles)", size=9, fill=MUTED))
    return out


def _head_group(
    case: Case, heads: list[int], m: np.ndarray, strips: Sequence[Strip], x0: float, y: float
) -> tuple[list[str], float, float]:
    """One panel of heads that share mask `m`, with their error strips beside and below it: its SVG
    elements, the x where it ends and the y where the next panel starts."""
    q_strips = [s for s in strips if s.axis == "query"]
    k_strips = [s for s in strips if s.axis == "key"]
    group = case.q_heads // case.kv_heads
    body: list[str] = []
    label = (
        "every head"
        if len(heads) == case.q_heads
        else f"head{'s' if len(heads) > 1 else ''} " + ",".join(map(str, heads))
    )
    body.append(_text(x0, y + 12, label, size=11, extra=' font-weight="bold"'))
    p = _Panel(x0, y + 40, case.q_len, case.kv_len)
    # crispEdges: adjacent cells meet without the anti-aliased seams that read as stripes.
    body += ['<g shape-rendering="crispEdges">', *_mask_cells(p, m), "</g>"]
    body += _tile_lines(p, case.block_dict) + _axis_marks(p, m, case.block_dict)
    body.append(_text(p.x + p.w / 2, p.y - 24, "keys", anchor="middle", size=10, fill=MUTED))
    body.append(
        f'<text transform="translate({_t(p.x - 34)} {_t(p.y + p.h / 2)}) rotate(-90)" text-anchor="middle" '
        f'font-size="10" fill="{MUTED}">query rows</text>'
    )
    x = p.x + p.w + GROUP_GAP
    for s in q_strips:
        shown = heads[:MAX_HEADS] if s.heads == case.q_heads else list(range(min(s.heads, MAX_HEADS)))
        body.append(_text(x, p.y - 24, s.quantity, size=11, extra=' font-weight="bold"'))
        for h in shown:
            body += _strip_cells(s, h, p.row, "down", x)
            body.append(_text(x + STRIP_PX / 2, p.y - 4, f"h{h}", anchor="middle", size=8, fill=MUTED))
            x += STRIP_PX + STRIP_GAP
        x += GROUP_GAP
    yk = p.y + p.h + 20
    for s in k_strips:
        kv = sorted({h // group for h in heads})[:MAX_HEADS]
        for h in kv:
            body += _strip_cells(s, h, p.col, "across", yk)
            body.append(_text(p.x + p.w + 6, yk + 9, f"{s.quantity} kv head {h}", size=10))
            yk += STRIP_PX + STRIP_GAP
        yk += 6
    grid = next((s for s in strips if s.grid), None)
    if grid is not None:
        x += GROUP_GAP
        g = _Panel(x, p.y, case.q_len, case.kv_len)
        body += _grid_cells(g, grid, heads[0], case)
        x = g.x + g.w
    y = yk + 10
    return body, x, y


def picture(case: Case, located: Located | None = None) -> Markup:
    """The mask of the located batch row (or row 0), one panel per distinct per-head mask, errors beside it."""
    batch = located.batch if located is not None else 0
    vis = dense_mask(case.mask, batch=case.batch, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len)[batch]
    groups: list[tuple[list[int], np.ndarray]] = []
    for h in range(case.q_heads):
        match = next((g for g in groups if np.array_equal(g[1], vis[h])), None)
        if match:
            match[0].append(h)
        else:
            groups.append(([h], vis[h]))
    strips = located.strips if located is not None else ()
    body: list[str] = []
    x0, y = 48.0, 26.0
    width = 0.0
    title = f"{case}"
    body.append(_text(8, 15, f"batch row {batch}: which keys each query sees, and where the error sits", size=12))
    for heads, m in groups[:MAX_HEADS]:
        drawn, x, y = _head_group(case, heads, m, strips, x0, y)
        body += drawn
        width = max(width, x + 10)
    if len(groups) > MAX_HEADS:
        body.append(_text(x0, y + 10, f"... {len(groups) - MAX_HEADS} more distinct head masks not drawn", fill=MUTED))
        y += 20
    if located is not None:
        body += _legend(x0, y + 6)
        y += 62
    else:
        body.append(_text(x0, y + 12, "no located errors recorded: the mask alone", size=10, fill=MUTED))
        y += 20
    width = max(width, 760.0)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="picture" width="{int(width)}" height="{int(y)}" '
        f'viewBox="0 0 {int(width)} {int(y)}" role="img" {FONT} font-size="11"><title>{escape(title)}</title>'
    )
    return Markup(head + "".join(body) + "</svg>")


def _grid_cells(g: _Panel, strip: Strip, head: int, case: Case) -> list[str]:
    t = tiling(case.block_dict, "fwd")
    out = [_text(g.x, g.y - 24, f"{strip.quantity} per tile, head {head}", size=11, extra=' font-weight="bold"')]
    if not strip.grid or not t.q or not t.k:
        return out
    for r, row in enumerate(strip.grid[min(head, len(strip.grid) - 1)]):
        for c, v in enumerate(row):
            a, b = r * t.q, min((r + 1) * t.q, case.q_len)
            ka, kb = c * t.k, min((c + 1) * t.k, case.kv_len)
            judged = f"{multiple(v)}x the bound" if v is not None else None
            label = f"{strip.quantity} q tile {r}, k tile {c}: {judged}" if judged else "not judged"
            out.append(_rect(g.col(ka), g.row(a), g.col(kb) - g.col(ka), g.row(b) - g.row(a), colour(v), label))
    out.append(_rect(g.x, g.y, g.w, g.h, "none", extra=f' stroke="{MUTED}" stroke-width="0.8"'))
    return out


def where_lines(located: Located | None) -> list[str]:
    """One line per located quantity: where it is past its bound."""
    return [where(s) for s in located.strips] if located is not None else []


def page(case: Case, located: Located | None, *, title: str) -> str:
    """A small self-contained HTML page around the picture (for `show --html`)."""
    items = "".join(f"<li>{escape(w)}</li>" for w in where_lines(located))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        '<style>body{font:14px "DejaVu Sans",Arial,sans-serif;margin:20px;color:#1f2328}'
        "li{margin:2px 0}</style></head><body>"
        f'<h1 style="font-size:17px">{escape(title)}</h1><p style="word-break:break-all">{escape(str(case))}</p>'
        f"{picture(case, located)}<ul>{items}</ul></body></html>"
    )
