"""The ragged paged-attention adapter: it runs, or `run` records why not with a distinct exit status."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings

from harness import cli
from harness.core import contract, paging, strategies
from harness.core.compare import compare, tolerance
from harness.core.inputs import make_inputs
from harness.core.masks import Lengths, Mask
from harness.core.strategies import cases
from harness.running.runner import run_case
from kernels.pallas_ragged_paged import PROBE, dropin
from tests import ragged_reference

RAGGED = contract.resolve("pallas_ragged_paged")
PLANTED = "pallas_ragged_paged=tests.planted.ragged_kv_len_off_by_one:ragged_paged_attention"
# Upstream's pure-JAX reference as the kernel: runs on any host, so the adapter is checked where the kernel cannot run.
REFERENCE = contract.resolve("pallas_ragged_paged=tests.ragged_reference:ragged_paged_attention")
# Two sequences at one diagonal (4 of 12 keys and 8 of 16 are queries) under a 4-key sliding
# window, with power-of-two k and v scales.
WINDOWED = PROBE.replace(
    q_len=8,
    mask=Mask(causal="bottom_right", **strategies.sliding_window(4, Lengths(q=(8, 8), kv=(12, 16)), 8, 16)),
    blocks={**PROBE.block_dict, "k_scale_exp": 2, "v_scale_exp": 3},
)


@settings(max_examples=150, deadline=None, database=None)
@given(cases(RAGGED))
def test_every_drawn_case_is_inside_the_contract(case):
    assert RAGGED.violations(case) == []


def test_the_kernel_runs_or_run_records_the_interpreters_error(tmp_path, capsys):
    reason = RAGGED.cannot_run()
    # One case drawn whole: finding the kernel's smoke set or its program pool (Hypothesis searches per feature)
    # cost most of this test, and whether the kernel runs here is decided on its first case either way.
    one_case = ["--examples", "1", "--no-smoke", "--no-pool"]
    code = cli.main(["run", "--kernel", "pallas_ragged_paged", *one_case, "--out", str(tmp_path)])
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


def test_the_adapter_passes_window_and_scales_natively_to_the_reference():
    assert WINDOWED.mask.lengths.q == (4, 8) and RAGGED.violations(WINDOWED) == []
    assert run_case(WINDOWED, [REFERENCE], grads=False).passed


def test_the_adapter_passes_the_soft_cap_natively():
    # Against the truth gathered from the pages, capped and not.
    capped = WINDOWED.replace(soft_cap=1.0)
    inputs = make_inputs(capped)
    layout = {"page_size": 8, "spare_pages": 1, "q_lens": (4, 8), "window": 4}
    truth, ruler = paging.case_reference(capped, inputs, **layout, cap=1.0)
    uncapped, _ = paging.case_reference(capped, inputs, **layout)
    got = REFERENCE.run(capped, inputs, grads=False).out
    rows = ~inputs.empty
    result = compare("out", got, truth, ruler, tolerance("float32", "out"), rows=rows)
    assert result.passed, result
    # The cap moves the answer far past the bound: an adapter that dropped it would fail.
    assert np.abs(truth[rows] - uncapped[rows]).max() > 100 * result.bound


@pytest.mark.parametrize("dropped", ["sliding_window", "k_scale", "v_scale"])
def test_a_kernel_that_ignores_a_parameter_fails(dropped):
    def ignoring(*args, **kwargs):
        kwargs.pop(dropped)
        return ragged_reference.ragged_paged_attention(*args, **kwargs)

    (subject,) = run_case(WINDOWED, [dropin(ignoring, name=f"ignores_{dropped}")], grads=False).subjects
    # A wrong answer, not an error: the adapter really passed the parameter it is dropping here.
    assert subject.error is None and not subject.comparisons[0].passed, subject


def test_windows_outside_the_sliding_form_are_violations():
    rows = Lengths(q=(3, 8), kv=(12, 16))  # the first sequence's queries one key off the window's diagonal
    shifted = WINDOWED.replace(mask=Mask(causal="bottom_right", window=WINDOWED.mask.window, lengths=rows))
    assert any("not a sliding window" in v for v in RAGGED.violations(shifted))


def test_spare_tokens_reach_the_kernel_as_nan_rows():
    padded = WINDOWED.replace(blocks={**WINDOWED.block_dict, "spare_tokens": 3})
    assert RAGGED.violations(padded) == []

    def leaky(q, *args, **kwargs):
        # Mixes every row of q, padding included, into every output: fails only where padding is NaN.
        return ragged_reference.ragged_paged_attention(q + 0 * q.sum(0, keepdims=True), *args, **kwargs)

    assert run_case(WINDOWED, [dropin(leaky, name="leaky")], grads=False).passed
    (subject,) = run_case(padded, [dropin(leaky, name="leaky")], grads=False).subjects
    assert subject.error is None and not subject.comparisons[0].passed, subject


def test_a_case_without_queries_calls_the_kernel_with_one_padding_row():
    # Every sequence decoded already (q[b] = 0): an empty q would be a zero-size pallas_call.
    empty = PROBE.replace(q_len=1, mask=Mask(causal="bottom_right", lengths=Lengths(q=(0, 0), kv=(9, 16))))
    assert RAGGED.violations(empty) == []
    assert run_case(empty, [RAGGED], grads=False).passed


def test_a_run_checks_the_kernel_under_its_refined_conventions_with_the_fix_named_once():
    # Implementation.with_conventions (a run's conventions, refined by harness.running.exactness; repro replays
    # with them) sets conventions, which this adapter computes: a property without a setter made every repro of
    # a ragged failure a harness failure (found by nox -s findings, the interpreter fix's proof).
    kernel = contract.resolve("pallas_ragged_paged")
    refined = dataclasses.replace(kernel.conventions, reproducible="reruns vary (a test's refinement)")
    twin = kernel.with_conventions(refined)
    assert twin.conventions.reproducible == refined.reproducible and kernel.conventions.reproducible is True
    notes = twin.conventions.notes
    assert all(notes.count(part) == 1 for part in kernel.conventions.notes.split("; ") if part)
