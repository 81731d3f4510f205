"""`python -m harness show FILE`: the picture of any case or failure file, without running anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.core.masks import Mask
from harness.running.failures import write_failure
from harness.running.runner import Check, run_case
from harness.store.files import RunStore
from tests import _fakes

ROOT = Path(__file__).resolve().parent.parent
OLD_FILES = sorted((ROOT / "docs" / "divergences").glob("*.json")) + sorted(
    (ROOT / "tests" / "regressions").glob("*.json")
)


@pytest.fixture(scope="module")
def failed():
    result = run_case(_fakes.small_case(mask=Mask(causal="top_left")), [_fakes.BROKEN], grads=False)
    assert not result.passed
    return result


def test_a_failure_file_shows_mask_and_errors_as_text_svg_and_html(tmp_path, capsys, failed):
    path = write_failure(tmp_path, failed, Check(kernel=_fakes.BROKEN, grads=False))
    svg, html = tmp_path / "pic" / "x.svg", tmp_path / "x.html"
    assert cli.main(["show", str(path), "--svg", str(svg), "--html", str(html)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "== tests._fakes:BROKEN" in out
    assert "mask of batch row 0" in out and "out h0" in out
    assert "out: past the bound in 16 of 16 q rows (0-15), head 0" in out
    assert svg.read_text().startswith('<svg xmlns="http://www.w3.org/2000/svg" class="picture"')
    page = html.read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page and "past the bound" in page


def test_a_case_record_shows_its_located_errors(tmp_path, capsys, failed):
    store = RunStore.create(tmp_path, meta={})
    (path,) = store.write_case(failed, shrunk=True)
    assert cli.main(["show", str(path)]) == cli.EXIT_OK
    assert "out: past the bound" in capsys.readouterr().out


@pytest.mark.parametrize("path", OLD_FILES, ids=lambda p: p.stem)
def test_a_failure_file_written_before_errors_were_located_shows_its_mask_alone(path, capsys):
    assert "located" not in path.read_text()
    assert cli.main(["show", str(path)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "mask of batch row 0" in out and "no located errors in this file" in out


def test_a_bare_case_shows_its_mask(tmp_path, capsys):
    case = _fakes.small_case(mask=Mask(causal="top_left"))
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case.to_json()))
    assert cli.main(["show", str(path)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"case {case}") and "no located errors" not in out


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param(None, "cannot read", id="missing file"),
        pytest.param("{", "is not JSON", id="not JSON"),
        pytest.param("[1]", "expected a JSON object", id="a list"),
        pytest.param('{"kind": "bench"}', "a 'bench' record has no case", id="another record kind"),
        pytest.param('{"batch": 1}', "bad case: case is missing fields", id="incomplete case"),
        pytest.param(
            '{"schema": 1, "kind": "failure", "kernel": "k", "oracles": [], "grads": false, "case": {"batch": 0}}',
            "bad case",
            id="failure with a bad case",
        ),
        # A failure file reads through its record (harness.store.failures), as repro reads it.
        pytest.param('{"kind": "failure", "case": {"batch": 1}}', "missing fields ['schema'", id="incomplete failure"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, text, words):
    path = tmp_path / "f.json"
    if text is not None:
        path.write_text(text)
    assert cli.main(["show", str(path)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_an_unwritable_output_exits_2(tmp_path, capsys, failed):
    path = write_failure(tmp_path, failed, Check(kernel=_fakes.BROKEN, grads=False))
    (tmp_path / "file").write_text("")
    assert cli.main(["show", str(path), "--svg", str(tmp_path / "file" / "x.svg")]) == cli.EXIT_USAGE
    assert "cannot write" in capsys.readouterr().err


def test_show_runs_no_kernel_and_needs_no_importable_kernel(tmp_path):
    # A failure file naming a kernel module that does not exist still draws (repro would refuse it).
    doc = json.loads(OLD_FILES[0].read_text()) | {"kernel": "no_such_module:fn"}
    path = tmp_path / "f.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "show", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "mask of batch row 0" in proc.stdout
