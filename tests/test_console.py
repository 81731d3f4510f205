"""Terminal output a person reads (harness.cli.console)."""

from __future__ import annotations

from harness.cli import console
from harness.core.case import Case
from harness.core.masks import Mask, Window
from harness.running.runner import CaseResult, SubjectResult
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
