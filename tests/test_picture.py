"""Failure pictures as SVG: the mask, its tiles, where the error sits; in the report, opened in Chromium.

The browser test needs Debian's `chromium` and skips without it, except in CI (see test_browser).
The screenshot is kept at reports/screenshots/failure_picture.png.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np

from harness.core.case import Case
from harness.core.locate import Located, Strip, locate
from harness.core.masks import Mask, Window
from harness.gate import thresholds
from harness.report import compose, picture, render
from harness.running.runner import run_case
from harness.store import read as records
from harness.store.files import RunStore
from tests import _fakes
from tests.test_browser import _chromium, _Dom, _run

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = ROOT / "reports" / "screenshots" / "failure_picture.png"
SCRIPT = "<script>document.title='pwned'</script>"


def _case(**changes) -> Case:
    base = dict(batch=1, q_heads=2, kv_heads=1, q_len=256, kv_len=256, head_dim=8, mask=Mask(causal="top_left"))
    return Case(**{**base, "blocks": {"block_q": 128, "block_k": 64, "block_k_major": 128}, **changes})


def _located(case: Case, *, bad_rows=slice(128, 256), nan_row=None) -> Located:
    shape = (case.batch, case.q_heads, case.q_len, case.head_dim)
    truth = np.zeros(shape)
    got = truth.copy()
    got[:, :, bad_rows, 0] = 5.0
    if nan_row is not None:
        got[0, 1, nan_row, 0] = np.nan
    kshape = (case.batch, case.kv_heads, case.kv_len, case.head_dim)
    return locate(
        {"out": got, "dk": np.zeros(kshape)}, {"out": truth, "dk": np.zeros(kshape)}, {"out": 1.0, "dk": 1.0},
        blocks=case.block_dict,
    )  # fmt: skip


def _titles(svg: str) -> list[str]:
    return re.findall(r"<title>(.*?)</title>", svg)


def test_picture_draws_the_mask_the_tiles_and_each_rows_error_against_the_bound():
    case = _case()
    svg = str(picture.picture(case, _located(case, nan_row=3)))
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="picture"') and svg.endswith("</svg>")
    titles = _titles(svg)
    # Rows of one shade are one rect; its tooltip gives the largest err/bound in it.
    assert "out head 0, q rows 128-255: up to 5.00x the bound" in titles
    assert "out head 0, q rows 0-127: up to 0x the bound" in titles
    assert "out head 1, q rows 3-3: 1 non-finite" in titles
    assert "out head 1, q rows 0-2: up to 0x the bound" in titles
    assert "dk head 0, k rows 0-255: up to 0x the bound" in titles
    # Past the bound is drawn red-side, within blue-side, non-finite apart.
    assert picture.colour(5.0) in svg and picture.colour(0.0) in svg and picture.NONFINITE in svg
    # Tiles: query boundary at 128 (block_q, solid); key boundaries at 64 and 192 dashed (minor), 128 solid (major).
    assert svg.count('class="tile minor"') == 2 and svg.count('class="tile major"') == 2
    assert "1 = bound" in svg and "every head" in svg


def test_rows_that_see_no_key_are_marked_and_heads_with_their_own_mask_get_their_own_panel():
    heads = (Mask(window=Window(left=None, right=0, offset=-3)), Mask(causal="top_left"))
    case = _case(mask=Mask(heads=heads), blocks={})
    svg = str(picture.picture(case, None))
    assert "query rows 0-2 see no key" in _titles(svg)
    assert "keys 253-255: no query sees them" in _titles(svg)
    assert ">head 0<" in svg and ">head 1<" in svg and "every head" not in svg
    assert "no located errors recorded: the mask alone" in svg


def test_colour_scale_turns_at_the_bound():
    under = [picture.colour(v) for v in (1e-4, 1e-2, 0.5, 1.0)]
    over = [picture.colour(v) for v in (1.0001, 10, 1e6)]
    assert all(c.startswith("#") and len(c) == 7 for c in under + over)
    red = lambda c: int(c[1:3], 16) - int(c[5:7], 16)  # noqa: E731 - red minus blue
    assert all(red(c) < 0 for c in under) and all(red(c) > 0 for c in over)
    assert picture.colour(None) == picture.UNJUDGED and picture.colour(1.0, nonfinite=True) == picture.NONFINITE


def test_text_from_a_record_is_escaped():
    case = _case()
    bad = Strip(quantity=SCRIPT, axis="query", length=256, stride=1, bound=1.0, values=((0.5,) * 256,))
    svg = str(picture.picture(case, Located(batch=0, per_batch=(0.5,), strips=(bad,))))
    assert "<script" not in svg and "&lt;script&gt;" in svg
    assert "<script" not in picture.page(case, None, title=SCRIPT)


def _report(tmp_path: Path) -> Path:
    """A store with a located failure (the fake BROKEN kernel) and a record written before locating."""
    store = RunStore.create(tmp_path / "store", meta={"command": ["test"], "profile": "ci"})
    case = _fakes.small_case(mask=Mask(causal="top_left"))
    result = run_case(case, [_fakes.BROKEN], grads=True)
    (path,) = store.write_case(result, shrunk=True)
    old = json.loads(path.read_text())
    old.pop("located")
    old["case"]["seed"] = 1
    old["case_id"] = Case.from_json(old["case"]).case_id
    (path.parent / "old--x.json").write_text(json.dumps(old))
    store.write_meta({"command": ["test"], "profile": "ci", "status": "finished"})
    report, _ = compose.make(records.load([tmp_path / "store"]), thresholds=thresholds.load())
    return render.write(report, tmp_path / "index.html")


def test_report_failure_cards_carry_pictures_only_where_errors_were_located(tmp_path):
    html = _report(tmp_path).read_text()
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="picture"') == 1
    assert html.count('class="failure"') == 2
    assert "out: past the bound in 16 of 16 q rows (0-15), head 0" in html


def test_report_with_pictures_renders_in_chromium(tmp_path):
    browser = _chromium()
    page = _report(tmp_path)
    proc = _run(browser, tmp_path, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _Dom()
    dom.feed(proc.stdout)
    assert "script" not in dom.tags
    assert dom.tags.get("svg", 0) >= 1 and dom.tags.get("rect", 0) > 16
    assert "where the error sits" in proc.stdout or "out: past the bound" in dom.text_by_id["failures"]
    shot = tmp_path / "picture.png"
    proc = _run(browser, tmp_path, f"--screenshot={shot}", "--window-size=1300,2400", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, SCREENSHOT)


def test_a_located_record_of_another_schema_draws_no_picture(tmp_path):
    case = _case()
    doc = _located(case).to_json() | {"schema": 2}
    assert Located.from_json(doc) is None


def test_dbias_is_drawn_per_query_tile_and_key_tile():
    case = _case(bias=True, blocks={"block_q": 128, "block_k": 128})
    truth = np.zeros((1, 2, 256, 256))
    got = truth.copy()
    got[0, 0, 130, 10] = 2.0  # query tile 1, key tile 0
    loc = locate({"dbias": got}, {"dbias": truth}, {"dbias": 1.0}, blocks=case.block_dict)
    titles = _titles(str(picture.picture(case, loc)))
    assert "dbias q tile 1, k tile 0: 2.00x the bound" in titles
    assert "dbias q tile 0, k tile 0: 0x the bound" in titles
