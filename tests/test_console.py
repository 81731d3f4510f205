"""Terminal output a person reads (harness.cli.console)."""

from __future__ import annotations

import dataclasses
import math

from harness.cli import console
from harness.core.case import Case
from harness.core.compare import Comparison
from harness.core.masks import Mask, Window
from harness.core.summary import KernelSummary
from harness.running.runner import CaseResult, SubjectResult
from harness.store import bug_views
from kernels.pallas_flash import uniform_blocks


def _result(case: Case, names: tuple[str, ...] = ("pallas_flash", "torch_sdpa")) -> CaseResult:
    subjects = [
        SubjectResult(implementation=n, role="kernel", backend="cpu", empty_rows="zeros", passed=True, comparisons=[])
        for n in names
    ]
    return CaseResult(case=case, subjects=subjects, seconds=2.2)


def test_a_case_line_shows_the_tiling_in_a_few_characters_and_the_whole_case_with_verbose():
    blocks = {**dict(uniform_blocks()), "block_k_major": 512, "block_k": 128}
    case = Case(
        batch=1, q_heads=1, kv_heads=1, q_len=512, kv_len=512, head_dim=64, blocks=tuple(sorted(blocks.items()))
    )
    line = console.progress_line(1, 20, _result(case))
    assert line.endswith("seed=0 tiles=q128,k512/128 dq:q128,k128 dkv:q128,k128"), line
    assert len(line) <= console.LINE_MAX and "block_" not in line
    assert console.progress_line(1, 20, _result(case), verbose=True).endswith(str(case))


def test_a_case_line_never_passes_the_limit():
    mask = Mask(causal="top_left", window=Window(left=3, right=2))
    case = Case(
        batch=2,
        q_heads=4,
        kv_heads=2,
        q_len=512,
        kv_len=384,
        head_dim=64,
        mask=mask,
        bias=True,
        blocks=uniform_blocks(),
    )
    names = ("pallas_flash_with_a_long_drop_in_name", "torch_sdpa", "xla_attention", "tokamax_xla")
    line = console.progress_line(10, 200, _result(case, names))
    assert len(line) <= console.LINE_MAX, line


def test_a_fail_row_shows_its_failing_worst_and_every_number_in_three_digits():
    rows = [
        KernelSummary(kernel="planted", examples=40, failed=3, worst=math.inf, seconds=8.0, status="FAIL"),
        KernelSummary(kernel="ratio", examples=40, failed=1, worst=9.5e4, seconds=8.0, status="FAIL"),
        KernelSummary(kernel="pallas_flash", examples=40, failed=0, worst=0.2617, seconds=8.0, status="PASS"),
    ]
    table = console.summary_table(rows).splitlines()
    assert table[2].split()[3] == "inf" and table[3].split()[3] == "9.50e4" and table[4].split()[3] == "0.262"


def test_the_error_table_writes_a_huge_ratio_in_three_digits_and_no_multiple_of_an_oracle_error_below_the_floor():
    lse = Comparison(
        quantity="lse",
        max_abs=2.38e38,
        max_rel=1e37,
        oracle_abs=5.6e-7,
        ratio=2.38e38 / 5.6e-7,
        bound=1.1e-6,
        passed=False,
    )
    out = Comparison(quantity="out", max_abs=8e-3, max_rel=8e-3, oracle_abs=4e-3, ratio=2.0, bound=9e-3, passed=True)
    subject = SubjectResult(
        implementation="k", role="kernel", backend="cpu", empty_rows="zeros", passed=False, comparisons=[lse, out]
    )
    table = bug_views.error_table(subject, "bfloat16")
    assert "421978413981571283952974101091304167138394112" not in table
    lse_row, out_row = (line.split() for line in table.splitlines()[2:4])
    assert lse_row[4] == "4.25e44" and out_row[4] == "2.00"
    # float32 floors at 1e-5 x the magnitude: an oracle error of 5.6e-7 is below it, so no multiple is shown.
    lse32 = dataclasses.replace(lse, bound=2 * 5.6e-7 + 1e-5)
    row = bug_views.error_table(dataclasses.replace(subject, comparisons=[lse32]), "float32").splitlines()[2]
    assert row.split()[4] == "-", row
