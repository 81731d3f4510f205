"""The ragged paged-attention adapter: it runs, or `run` records why not with a distinct exit status."""

from __future__ import annotations

import json

from hypothesis import given, settings

from harness import cli, contract
from harness.runner import run_case
from harness.strategies import cases
from kernels.pallas_ragged_paged import PROBE

RAGGED = contract.resolve("pallas_ragged_paged")
PLANTED = "pallas_ragged_paged=tests.planted.ragged_kv_len_off_by_one:ragged_paged_attention"


@settings(max_examples=150, deadline=None, database=None)
@given(cases(RAGGED))
def test_every_drawn_case_is_inside_the_contract(case):
    assert RAGGED.violations(case) == []


def test_the_kernel_runs_or_run_records_the_interpreters_error(tmp_path, capsys):
    reason = RAGGED.cannot_run()
    code = cli.main(["run", "--kernel", "pallas_ragged_paged", "--examples", "1", "--out", str(tmp_path)])
    if reason is None:
        assert code == cli.EXIT_OK, capsys.readouterr().out
        return
    # jax 0.10.2: "AttributeError: 'ReshapeTransform' object has no attribute 'indices'" from the interpreter.
    assert code == cli.EXIT_CANNOT_RUN, capsys.readouterr().out
    (meta,) = tmp_path.glob("records/*/run.json")
    run = json.loads(meta.read_text())
    assert run["status"] == "cannot run here"
    assert run["cannot_run"] == {"pallas_ragged_paged": reason}
    assert "cannot run here: " + reason in capsys.readouterr().out
    # The report shows the cell as "cannot run here", never as a pass.
    report_code = cli.main(["report", "--store", str(tmp_path), "--out", str(tmp_path / "r.html")])
    out = capsys.readouterr().out
    assert report_code == cli.EXIT_FAIL and "PASS" not in out.splitlines()[0]
    assert f"pallas_ragged_paged cannot run here: {reason}" in (tmp_path / "r.html").read_text().replace("&#39;", "'")


def test_planted_ragged_length_bug_is_caught_where_the_kernel_runs():
    planted = contract.resolve(PLANTED)
    reason = planted.cannot_run()
    if reason is not None:
        # Where the kernel cannot run, the drop-in cannot either, and says why (the same error).
        assert reason == RAGGED.cannot_run()
        return
    assert run_case(PROBE, [RAGGED], grads=False).passed
    assert not run_case(PROBE, [planted], grads=False).passed
