"""The report's HTML step: a Report (harness.report.data) in, one self-contained HTML file out.

Jinja2 with autoescape on: every string from records (cases, exceptions, versions,
hosts, commands) is escaped by the template; only the SVG plots, built and escaped in
harness.report.svg, are marked safe.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections import defaultdict
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from harness.core.case import Case, CaseError
from harness.core.numbers import multiple
from harness.gate import fmt_seconds
from harness.gate.thresholds import fmt_bytes
from harness.report import picture, svg
from harness.report.data import FailureView, Report, SeriesRow
from harness.store.files import publish_mode

TEMPLATES = Path(__file__).with_name("templates")
# A case's block sizes ("blocks=block_b=1,block_k=128,...") are one word of hundreds of characters: it may break
# after each comma. Every other word stays whole (report.css breaks lines only where the text allows: at spaces,
# after a slash or a hyphen), so a table too narrow for its words scrolls rather than split one.
_AFTER_COMMA = re.compile(r"(?<=,)(?=\S)")


def wbr(text: object) -> Markup:
    """`text` escaped, with a line-break opportunity (<wbr>) after each comma that no space follows."""
    return Markup("<wbr>").join(Markup(piece) for piece in _AFTER_COMMA.split(str(escape(text))))


def jinja_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # the templates end in .html.j2, which select_autoescape would not match
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # Every error/bound and multiple on the page is written as the terminal and the failure file write it.
    env.filters["share"] = lambda x: "-" if x is None or (isinstance(x, float) and math.isnan(x)) else multiple(x)
    env.filters["wbr"] = wbr
    return env


def _series_plots(rows: list[SeriesRow], labels: list[str], *, y_label: str, fmt, binary: bool = False) -> list[Markup]:
    by_plot: dict[str, list[SeriesRow]] = defaultdict(list)
    for row in rows:
        by_plot[row.plot].append(row)
    plots = []
    for title, group in sorted(by_plot.items()):
        series = [
            svg.Series(name=r.name, values=[c.value for c in r.cells], lows=r.lows or (), highs=r.highs or ())
            for r in sorted(group, key=lambda r: r.name)
        ]
        plots.append(svg.line_chart(title, labels, series, y_label=y_label, fmt=fmt, binary=binary))
    return plots


def _picture(f: FailureView) -> Markup | None:
    """The failure's picture, or None where its record located nothing (or its case no longer reads)."""
    if f.located is None or f.case is None:
        return None
    try:
        case = Case.from_json(f.case)
    except CaseError:
        return None
    return picture.picture(case, f.located)


def plots(report: Report) -> dict[str, list[Markup]]:
    labels = [e.label for e in report.envs]
    return {
        "pictures": [_picture(f) for f in report.failures],
        "histograms": [svg.histogram(h) for h in report.histograms],
        "speed": _series_plots(report.speed, labels, y_label="median time", fmt=fmt_seconds),
        "memory": _series_plots(report.memory, labels, y_label="compiled temp memory", fmt=fmt_bytes, binary=True),
        "compile_times": _series_plots(report.compile_times, labels, y_label="median seconds", fmt=fmt_seconds),
        "leaks": [
            svg.sparkline(
                row.samples, title=f"{row.implementation} {row.variant}: {row.plotted} per call", bad=not row.passed
            )
            for row in report.leaks
        ],
    }


def render(report: Report) -> str:
    return jinja_env().get_template("report.html.j2").render(r=report, plots=plots(report))


def write(report: Report, out: Path | str) -> Path:
    """Render and write atomically (a reader never sees half a report)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    html = render(report)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        publish_mode(fd)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(html)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out
