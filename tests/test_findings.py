"""The findings catalogue (harness/findings.py) and `python -m harness findings`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness import findings
from harness.cli import main

NOTE = """\
+++
title = "{name}"
kind = "{kind}"
component = "a component"
condition = "the exact condition"
script = "{name}.py"
timeout_s = 30
introduced = "somewhere"
upstream = []
upstream_searched = "the issues corpus"
draft = "a title"
{extra}
[releases]
"0.10.2" = "shows"
+++

# {name}
"""


def _finding(folder: Path, name: str, code: str, *, kind: str = "limitation", extra: str = "") -> None:
    (folder / f"{name}.md").write_text(NOTE.format(name=name, kind=kind, extra=extra))
    (folder / f"{name}.py").write_text(textwrap.dedent(code))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    _finding(tmp_path, "a_shows", "print('still here')\nraise SystemExit(1)\n")
    _finding(tmp_path, "b_fixed", "print('agrees now')\n")
    _finding(tmp_path, "c_elsewhere", "print('cannot run here: no GPU')\nraise SystemExit(4)\n")
    return tmp_path


def test_every_note_in_the_repository_carries_its_metadata():
    catalogue = findings.catalogue()
    names = {f.name for f in catalogue}
    # The seven the review sent back, the new GPU script among them, are all in the catalogue.
    assert {
        "pallas_paged_megacore_interpreter_hang",
        "pallas_ragged_paged_interpreter",
        "pallas_paged_float32_pages_bf16",
        "pallas_splash_backward_nan_larger_dkv_tile",
        "pallas_gpu_causal_q_longer_than_kv",
        "jax_xla_float64_softmax_in_float32",
        "pallas_splash_fully_masked_assert",
    } <= names
    notes = [p for d in findings.DIRS for p in d.glob("*.md") if p.name != "README.md"]
    assert len(catalogue) == len(notes)
    for f in catalogue:
        assert f.script.is_file() and f.condition and f.releases and f.draft
        assert f.upstream or f.upstream_searched, f.name
        if f.kind == "bug":
            # A bug is fixed upstream, or has a fix whose shrunk case exists and a run to prove it with.
            assert f.fix is not None and (f.fix.upstream or (f.fix.case.is_file() and f.fix.run)), f.name


def test_the_command_prints_each_findings_status_and_exits_0(folder, capsys):
    assert main(["findings", "--dir", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "still shows it" in lines[0] and lines[0].endswith("still here")
    assert "fixed since" in lines[1] and lines[1].endswith("agrees now")
    assert "cannot run here" in lines[2]
    assert lines[-1] == "1 still shows it, 1 fixed since, 1 cannot run here"


def test_json_output_is_one_object_per_finding(folder, capsys):
    assert main(["findings", "--dir", str(folder), "--json", "b_fixed"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["status"], row["returncode"], row["releases"]) == (
        "b_fixed",
        "fixed since",
        0,
        {"0.10.2": "shows"},
    )


def test_a_script_that_crashes_or_overruns_is_a_harness_failure(folder, capsys):
    _finding(folder, "d_crash", "raise RuntimeError('boom')\n")
    _finding(folder, "e_slow", "import time\ntime.sleep(30)\n")
    assert main(["findings", "--dir", str(folder), "--timeout", "3", "d_crash", "e_slow"]) == 3
    out = capsys.readouterr().out
    assert "script failed" in out and "RuntimeError: boom" in out and "no result within 3 s" in out


BAD_NOTES = [
    pytest.param("kind =", 'kind = "quirk"', "kind='quirk' must be one of", id="unknown kind"),
    pytest.param("script =", 'script = "missing.py"', "does not exist", id="missing script"),
    pytest.param("title =", 'title = ""', "front matter needs title", id="empty title"),
    pytest.param(
        '"0.10.2" =', '"0.10.2" = "maybe"', "[releases] needs at least one measured release", id="bad release"
    ),
    pytest.param("timeout_s =", "timeout_s = 0", "timeout_s=0 must be a positive number", id="zero timeout"),
]


@pytest.mark.parametrize(("prefix", "line", "message"), BAD_NOTES)
def test_malformed_metadata_is_bad_input(folder, capsys, prefix, line, message):
    note = folder / "a_shows.md"
    text = note.read_text()
    old = next(x for x in text.splitlines() if x.startswith(prefix))
    note.write_text(text.replace(old, line))
    assert main(["findings", "--dir", str(folder), "--list"]) == 2
    assert message in capsys.readouterr().err


def test_a_bug_needs_a_fix_and_a_note_needs_its_block(folder, capsys):
    _finding(folder, "f_bug", "raise SystemExit(1)\n", kind="bug")
    assert main(["findings", "--dir", str(folder), "--list"]) == 2
    assert "a bug needs a [fix] table" in capsys.readouterr().err
    (folder / "f_bug.md").write_text("# no metadata\n")
    assert main(["findings", "--dir", str(folder), "--list"]) == 2
    assert "must open with a TOML block" in capsys.readouterr().err


def test_an_unknown_name_is_bad_usage(folder, capsys):
    assert main(["findings", "--dir", str(folder), "nope"]) == 2
    assert "unknown finding 'nope'" in capsys.readouterr().err


def test_the_splash_pull_request_raises_a_value_error_with_a_message():
    # docs/findings/pallas_splash_fully_masked_assert.md: the PR, as an edit of upstream at import.
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    from docs.findings.fixes import splash_hidden_mask_error as pr

    hidden = mask_lib.MultiHeadMask([mask_lib.CausalMask((128, 128), offset=-128)])
    with pytest.raises(ValueError, match=r"hides every key from every query.*mask\.shape=\(1, 128, 128\)"):
        pr.make_splash(hidden, head_shards=1, q_seq_shards=1, is_mqa=False)
    pr.make_splash(
        mask_lib.MultiHeadMask([mask_lib.CausalMask((128, 128))]), head_shards=1, q_seq_shards=1, is_mqa=False
    )


FIX = """
[fix]
fixed = "a_kernel=a.module:fixed"
unfixed = "a_kernel"
case = "a_case.json"
run = ["--examples", "2"]
unfixed_run = "{unfixed_run}"
{env}
"""


@pytest.mark.parametrize(
    ("unfixed_run", "env", "message"),
    [
        pytest.param("cannot run", 'unfixed_env = { A_SWITCH = "off" }', None, id="a-switch-and-cannot-run"),
        pytest.param("crashes", "", "unfixed_run='crashes' must be one of", id="unknown-unfixed-run"),
        pytest.param("fails", "unfixed_env = { A_SWITCH = 0 }", "unfixed_env must be a table of strings", id="env"),
    ],
)
def test_a_fix_table_reads_its_unfixed_run_and_environment(folder, unfixed_run, env, message):
    (folder / "a_case.json").write_text("{}")
    extra = FIX.format(unfixed_run=unfixed_run, env=env)
    note = folder / "a_shows.md"
    # The [fix] table goes last in the front matter (after [releases]).
    note.write_text(note.read_text().replace('"0.10.2" = "shows"\n', '"0.10.2" = "shows"\n' + extra, 1))
    if message is not None:
        with pytest.raises(findings.FindingError, match=message.replace("[", r"\[")):
            findings.load(note)
        return
    fix = findings.load(note).fix
    assert (fix.unfixed_run, fix.unfixed_env) == ("cannot run", {"A_SWITCH": "off"})
