"""Plots as inline SVG strings, drawn in Python: no JavaScript, no fonts or files to fetch.

Every piece of text is escaped here, since the result is marked safe for the template.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from harness.report.data import HIST_EDGES, Histogram

# Colour-blind-safe categorical palette (Okabe-Ito), then greys for the overflow.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
PASS_FILL, FAIL_FILL, AXIS, GRID = "#4C9F70", "#C0392B", "#555", "#e3e3e3"
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'


def _t(x: float) -> str:
    return f"{x:.1f}"


def _svg(width: int, height: int, title: str, body: list[str]) -> Markup:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" {FONT} font-size="11"><title>{escape(title)}</title>'
    )
    return Markup(head + "".join(body) + "</svg>")


# Widths of DejaVu Sans at the plots' 11 px, bold and regular, rounded up: the longest text that fits a line.
BOLD_CHAR_PX, CHAR_PX = 7.5, 6.8


def fit(text: str, px: float, *, char_px: float = BOLD_CHAR_PX) -> str:
    """`text` cut to `px` wide, keeping its end: a fork's import path differs from another's at its end
    ("...forks.flash_v3:flash_attention"); the whole name is the plot's tooltip."""
    room = max(4, int(px / char_px))
    return text if len(text) <= room else "\u2026" + text[-(room - 1) :]


def histogram(h: Histogram, *, width: int = 440, height: int = 224) -> Markup:
    """Counts of max_abs / bound per half decade; bars past the bound (1) are red. The implementation's
    name on its own line (cut to the plot's width), the counts under it: a long name never runs over them."""
    left, right, top, bottom = 44, 10, 40, 36
    pw, ph = width - left - right, height - top - bottom
    n = len(h.counts)
    bw = pw / n
    peak = max(h.counts) or 1
    over_from = 1 + HIST_EDGES.index(0.0)  # first bin at or past the bound
    body = [
        f'<text x="{left}" y="14" font-weight="bold">{escape(fit(h.implementation, width - left - right))}</text>',
        f'<text x="{left}" y="28" fill="{AXIS}">{h.n} comparisons, {h.over_bound} past the bound</text>',
    ]
    for count in sorted({peak // 2, peak} - {0}):  # whole counts, drawn at their true height
        y = top + ph * (1 - count / peak)
        body.append(f'<line x1="{left}" x2="{left + pw}" y1="{_t(y)}" y2="{_t(y)}" stroke="{GRID}"/>')
        body.append(f'<text x="{left - 4}" y="{_t(y + 4)}" text-anchor="end" fill="{AXIS}">{count}</text>')
    for i, count in enumerate(h.counts):
        bh = ph * count / peak
        fill = FAIL_FILL if i >= over_from else PASS_FILL
        x = left + i * bw
        body.append(
            f'<rect class="bar" x="{_t(x + 1)}" y="{_t(top + ph - bh)}" width="{_t(bw - 2)}" height="{_t(bh)}" '
            f'fill="{fill}"><title>{escape(h.labels[i])}: {count}</title></rect>'
        )
    # Decade ticks sit on bin edges: edge k is the left side of bin k + 1.
    for k, edge in enumerate(HIST_EDGES):
        if edge != int(edge):
            continue
        x = left + (k + 1) * bw
        label = "1" if edge == 0 else ("10" if edge == 1 else f"1e{int(edge)}")
        body.append(f'<line x1="{_t(x)}" x2="{_t(x)}" y1="{top + ph}" y2="{top + ph + 4}" stroke="{AXIS}"/>')
        body.append(f'<text x="{_t(x)}" y="{top + ph + 15}" text-anchor="middle" fill="{AXIS}">{label}</text>')
    xb = left + over_from * bw
    body.append(
        f'<line x1="{_t(xb)}" x2="{_t(xb)}" y1="{top - 4}" y2="{top + ph}" '
        f'stroke="{FAIL_FILL}" stroke-dasharray="4 3"/>'
    )
    body.append(f'<text x="{_t(xb + 3)}" y="{top + 6}" fill="{FAIL_FILL}">bound</text>')
    body.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="{AXIS}"/>')
    body.append(
        f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle" fill="{AXIS}">'
        "error / tolerance bound (log scale; past 1 fails)</text>"
    )
    return _svg(width, height, f"error-ratio distribution of {h.implementation}", body)


@dataclasses.dataclass(kw_only=True)
class Series:
    name: str
    values: Sequence[float | None]
    lows: Sequence[float | None] = ()
    highs: Sequence[float | None] = ()


def _nice_ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        return [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    span = hi - lo or abs(hi) or 1.0
    step = 10 ** math.floor(math.log10(span / 4))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= 6:
            step *= m
            break
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Plot:
    """A line chart's plot area and its y scale: pixel positions of x categories and y values."""

    left: float
    top: float
    pw: float
    ph: float
    n: int  # x categories
    lo: float
    hi: float
    log: bool

    def x(self, i: int) -> float:
        return self.left + self.pw * (i + 0.5) / self.n

    def y(self, v: float) -> float:
        if self.log:
            span = math.log10(self.hi) - math.log10(self.lo)
            return self.top + self.ph * (1 - (math.log10(v) - math.log10(self.lo)) / span)
        return self.top + self.ph * (1 - (v - self.lo) / (self.hi - self.lo))


def _y_scale(values: Sequence[float], binary: bool) -> tuple[float, float, bool, list[float]]:
    """(lo, hi, log, ticks) of the y axis over the positive `values`; log when they span over 20x."""
    lo, hi = min(values), max(values)
    log = hi / lo > 20
    if log:
        lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
    else:
        pad = (hi - lo) * 0.15 or hi * 0.1
        lo, hi = max(0.0, lo - pad), hi + pad
    unit = 1024 ** max(0, math.floor(math.log(hi, 1024))) if binary and not log else 1.0
    ticks = [t * unit for t in _nice_ticks(lo / unit, hi / unit, log) if lo <= t * unit <= hi]
    if not log and ticks:
        lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    return lo, hi, log, ticks


def _axes(
    p: _Plot, ticks: Sequence[float], x_labels: Sequence[str], y_label: str, fmt: Callable[[float], str]
) -> list[str]:
    left, top, pw, ph = p.left, p.top, p.pw, p.ph
    body = []
    for t in ticks:
        body.append(f'<line x1="{left}" x2="{left + pw}" y1="{_t(p.y(t))}" y2="{_t(p.y(t))}" stroke="{GRID}"/>')
        body.append(
            f'<text x="{left - 5}" y="{_t(p.y(t) + 4)}" text-anchor="end" fill="{AXIS}">{escape(fmt(t))}</text>'
        )
    body.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="{AXIS}"/>')
    body.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="{AXIS}"/>')
    body.append(
        f'<text transform="translate(14 {_t(top + ph / 2)}) rotate(-90)" text-anchor="middle" fill="{AXIS}">'
        f"{escape(y_label)}{' (log)' if p.log else ''}</text>"
    )
    for i, label in enumerate(x_labels):
        lines = "".join(
            f'<tspan x="{_t(p.x(i))}" dy="{0 if k == 0 else 13}">{escape(part)}</tspan>'
            for k, part in enumerate(label.split(" · "))
        )
        body.append(f'<text y="{top + ph + 15}" text-anchor="middle" fill="{AXIS}" font-size="10">{lines}</text>')
    return body


def _series_marks(p: _Plot, si: int, s: Series, x_labels: Sequence[str], fmt: Callable[[float], str]) -> list[str]:
    """Series number `si`: its points with their whiskers, and a line through each unbroken run of them."""
    body = []
    color = PALETTE[si % len(PALETTE)]
    dash = "" if si < len(PALETTE) else ' stroke-dasharray="5 3"'
    runs: list[list[str]] = [[]]
    for i, v in enumerate(s.values):
        if v is None or v <= 0:
            runs.append([])
            continue
        runs[-1].append(f"{_t(p.x(i))},{_t(p.y(v))}")
        lo_i = s.lows[i] if i < len(s.lows) else None
        hi_i = s.highs[i] if i < len(s.highs) else None
        if lo_i and hi_i:
            body.append(
                f'<line x1="{_t(p.x(i))}" x2="{_t(p.x(i))}" y1="{_t(p.y(lo_i))}" y2="{_t(p.y(hi_i))}" '
                f'stroke="{color}" stroke-width="1.2" opacity="0.6"/>'
            )
        body.append(
            f'<circle class="point" cx="{_t(p.x(i))}" cy="{_t(p.y(v))}" r="3.2" fill="{color}">'
            f"<title>{escape(s.name)} at {escape(x_labels[i])}: {escape(fmt(v))}</title></circle>"
        )
    for pts in runs:
        if len(pts) > 1:
            body.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>')
    return body


def line_chart(
    title: str,
    x_labels: Sequence[str],
    series: Sequence[Series],
    *,
    y_label: str,
    fmt: Callable[[float], str],
    width: int = 640,
    height: int = 300,
    binary: bool = False,
) -> Markup:
    """One line per series over categorical x (library versions), with quartile whiskers when given.

    binary: the figures are bytes, so linear ticks fall on round KiB/MiB/GiB.
    """
    values = [v for s in series for v in list(s.values) + list(s.lows) + list(s.highs) if v is not None and v > 0]
    legend_rows = math.ceil(len(series) / 2)
    label_lines = max((len(x.split(" · ")) for x in x_labels), default=1)
    left, right, top = 70, 16, 28
    bottom = 22 + 13 * label_lines + 16 * legend_rows
    ph = height - top - bottom
    if ph < 120:  # keep the plot area readable when the legend is long
        height += 120 - ph
        ph = 120
    pw = width - left - right
    body = [f'<text x="{left}" y="16" font-weight="bold">{escape(title)}</text>']
    if not values:
        body.append(f'<text x="{left}" y="{top + 20}" fill="{AXIS}">no figures to plot</text>')
        return _svg(width, height, title, body)
    lo, hi, log, ticks = _y_scale(values, binary)
    plot = _Plot(left=left, top=top, pw=pw, ph=ph, n=len(x_labels), lo=lo, hi=hi, log=log)
    body += _axes(plot, ticks, x_labels, y_label, fmt)
    for si, s in enumerate(series):
        body += _series_marks(plot, si, s, x_labels, fmt)
    ly = top + ph + 22 + 13 * label_lines
    for si, s in enumerate(series):
        lx = left + (si % 2) * pw / 2
        yy = ly + (si // 2) * 16
        color = PALETTE[si % len(PALETTE)]
        body.append(f'<rect x="{_t(lx)}" y="{yy - 8}" width="14" height="4" fill="{color}"/>')
        body.append(f'<text x="{_t(lx + 19)}" y="{yy - 3}">{escape(s.name)}</text>')
    return _svg(width, height, title, body)


def sparkline(values: Sequence[float], *, title: str, bad: bool, width: int = 160, height: int = 32) -> Markup:
    """A line of `values` against call number, from its minimum to its maximum (flat: a level line)."""
    if not values:
        return Markup("")
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    step = (width - 4) / max(len(values) - 1, 1)
    points = " ".join(
        f"{_t(2 + i * step)},{_t(height - 2 - (v - lo) / span * (height - 4))}" for i, v in enumerate(values)
    )
    colour = FAIL_FILL if bad else PASS_FILL
    return _svg(
        width, height, title, [f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>']
    )
