"""`watch`'s page: the newer releases of the pinned packages, each one's gate verdict, its regressions
with their replay commands, and the constraints change that takes it. Rendered from watch.json's data
(harness.cli.commands.watch), never from live objects, with the report's styles."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from harness.report.render import jinja_env

TEMPLATE = "watch.html.j2"


def render(data: dict[str, Any]) -> str:
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return jinja_env().get_template(TEMPLATE).render(w=data, generated=generated)


def write(data: dict[str, Any], out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(data))
    return out
