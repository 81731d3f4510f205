"""The gate's outline rows (harness.gate.outline): the planted forks of tests.planted.OUTLINE, compiled
for a compile-only v5e, each fail the gate against upstream with the outline's diff; upstream against
itself passes."""

from __future__ import annotations

import json

import pytest

from harness import gate
from harness.core import contract
from harness.core.shapes import SHAPES
from harness.gate import outline as gate_outline
from harness.gate import thresholds
from harness.store.outline import KernelCall, Op, Outline
from harness.store.read import Records, load
from tests.planted import OUTLINE, spec

pytest.importorskip("libtpu", reason="compile checks need libtpu (pip install .[tpu])")

from harness.tpu import compile as aot  # noqa: E402 - after the libtpu check

SHAPE, TOPOLOGY = "mha_f32_256", "v5e:1x1"
SUBJECT = f"pallas_flash fwd {SHAPE} on {TOPOLOGY} outline"
TH = thresholds.load(None)


@pytest.fixture(scope="module")
def compiled() -> dict[str, aot.CompileResult]:
    """Upstream and each planted fork, forward, compiled once, each recorded under its own name as `compile
    --kernel` records it: the gate pairs a fork with the built-in it replaces (harness.gate.forks)."""
    out = {}
    for name, kernel in [("upstream", "pallas_flash"), *((n, spec(n)) for n in OUTLINE)]:
        r = aot.compile_one(contract.resolve(kernel), SHAPES[SHAPE], TOPOLOGY, "fwd")
        assert r.ok and r.outline is not None, r.error or r.outline_error
        out[name] = r
    return out


def _records(result: aot.CompileResult, run_id: str) -> Records:
    out = Records()
    out.add(aot.compile_record(result, run_id=run_id).to_json(), "test")
    return out


def _gate(compiled: dict[str, aot.CompileResult], base: str, cand: str) -> gate.GateResult:
    return gate.compare(
        _records(compiled[base], "20261204T000000Z-ci-aaaaaa"),
        _records(compiled[cand], "20261204T010000Z-ci-bbbbbb"),
        TH,
    )


def _row(result: gate.GateResult) -> gate.Row:
    (row,) = [r for r in result.rows if r.category == "outline"]
    return row


def test_upstream_against_itself_passes_with_an_unchanged_outline(compiled) -> None:
    result = _gate(compiled, "upstream", "upstream")
    row = _row(result)
    assert not result.failed and row.subject == SUBJECT and row.status == "unchanged"
    assert row.detail == "flash_attention (_flash_attention_kernel)"


def test_the_relayout_fork_fails_naming_the_added_copy_of_k_and_its_bytes(compiled) -> None:
    result = _gate(compiled, "upstream", "relayout_k")
    row = _row(result)
    assert result.failed and row.fails and row.status == "worse"
    assert row.subject == f"{spec('relayout_k')} vs {SUBJECT}"  # the fork named beside what it replaces
    # k is f32[1,2,256,128]: 256 KiB read and 256 KiB written into the transposed layout.
    assert "around the kernel: copy added, 0 B -> 512.00 KiB moved (+512.00 KiB)" in row.detail
    assert "f32[1,2,256,128] relayout reads 256.00 KiB writes 256.00 KiB" in row.detail
    assert "outline" in result.summary()


def test_the_anonymous_kernel_fork_fails_saying_the_kernel_lost_its_name(compiled) -> None:
    row = _row(_gate(compiled, "upstream", "anonymous_kernel"))
    assert row.fails and "1 kernel name lost" in row.change
    assert "flash_attention (_flash_attention_kernel) -> flash_attention (_lambda_)" in row.detail
    assert "op kind" not in row.change  # nothing grew around it


def test_the_fork_as_baseline_and_upstream_as_candidate_is_no_regression(compiled) -> None:
    # A copy removed and a name regained are improvements of the program, never failures.
    for fork in OUTLINE:
        assert not _row(_gate(compiled, fork, "upstream")).fails


def _one_op(kind: str, nbytes: int) -> Outline:
    kernel = KernelCall(name="k.1", kernel_name="kern", bytes_read=nbytes, bytes_written=nbytes)
    return Outline(
        kernels=(kernel,), ops=(Op(name="op", kind=kind, shape="f32[1]", bytes_read=nbytes, bytes_written=0),)
    )


@pytest.mark.parametrize(
    ("before", "after", "grew"),
    [
        pytest.param(1 << 20, int((1 << 20) * (1 + gate_outline.GROWTH)), False, id="at-the-growth-limit"),
        pytest.param(1 << 20, 2 << 20, True, id="doubled"),
        pytest.param(0, gate_outline.MIN_BYTES, False, id="added-at-the-byte-floor"),
        pytest.param(0, gate_outline.MIN_BYTES + 1, True, id="added-above-the-byte-floor"),
    ],
)
def test_an_op_kind_grows_only_past_both_limits(before: int, after: int, grew: bool) -> None:
    b = _one_op("copy", before) if before else Outline()
    assert bool(gate_outline.grown(b, _one_op("copy", after))) is grew


def test_a_fork_gated_against_upstream_as_a_user_runs_it(tmp_path, capsys) -> None:
    # `compare-fork` runs the fork and pallas_flash on the same cases and compiles, each into its own store, and
    # gates one against the other: the outline row names the fork beside upstream, and every case pairs. One case a
    # side, the first of pallas_flash's smoke set (the fork's too: the same capabilities); a second, smoke as well,
    # paired the same way and cost two more runs under the faithful interpreter. One step at a time: the second run
    # reads the smoke set, the exactness probe and the oracles' programs the first left on disk instead of finding
    # them beside it (two steps at once are tests/test_upgrade.py's, on run_all).
    from harness.cli import main

    fork = f"pallas_flash={spec('relayout_k')}"
    out = tmp_path / "out"
    argv = ["compare-fork", fork, "--examples", "1", "--compile-shape", SHAPE, "--compile-topology", TOPOLOGY]
    assert main([*argv, "--compile-rounds", "1", "--no-bench", "--jobs", "1", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert text.startswith(f"compare-fork: {fork} against pallas_flash, 1 cases each"), text
    summary = json.loads((out / "summary.json").read_text())
    outlines = {r["subject"]: r for r in summary["failures"] if r["category"] == "outline"}
    assert set(outlines) == {f"{fork} vs pallas_flash {p} {SHAPE} on {TOPOLOGY} outline" for p in ("fwd", "fwd_bwd")}
    outline = outlines[f"{fork} vs pallas_flash fwd {SHAPE} on {TOPOLOGY} outline"]
    assert "copy added" in outline["detail"] and "relayout reads 256.00 KiB" in outline["detail"]
    assert not [r for r in summary["failures"] if r["category"] != "outline"], summary["failures"]
    # The same case on both sides, paired one to one (the fork draws its upstream's cases).
    upstream, forked = (load([out / side]).cases for side in ("upstream", "fork"))
    ids = lambda cases, name: sorted(r.case_id for r in cases if r.implementation == name)  # noqa: E731
    assert ids(upstream, "pallas_flash") == ids(forked, fork) and len(ids(forked, fork)) == 1
    assert "MISSING" not in text and "not compiled by" not in text
