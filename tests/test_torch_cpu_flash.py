"""torch's fused CPU attention (SDPA forced onto FLASH_ATTENTION) as a kernel: its forcing, its API options, its
probed conventions, and the finding it made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings

from harness.core import contract, emptygrads, smoke, strategies
from harness.core.case import Case
from harness.core.inputs import empty_cotangent
from harness.core.masks import Lengths, Mask, Segments, Window
from harness.core.torchvjp import classify_empty_row
from harness.running.failures import load_failure
from harness.running.runner import run_case
from harness.runtime import isa
from kernels import torch_cpu_flash as tcf

FIX_CASE = Path(__file__).resolve().parent.parent / "docs" / "findings" / "fixes" / "torch_float32_mask.json"
MASKED_ROW_CASE = FIX_CASE.with_name("torch_masked_row.json")
FLASH = contract.resolve("torch_cpu_flash")


def test_the_forced_call_runs_the_fused_kernel_and_refuses_instead_of_falling_back() -> None:
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    assert type(tcf._flash(q, q, q).grad_fn).__name__ == "ScaledDotProductFlashAttentionForCpuBackward0"
    three_d = torch.ones(2, 4, 4, dtype=torch.bool)
    # Unforced, torch takes the math path for a 3-D mask; forced, the kernel refuses it.
    assert "Flash" not in type(F.scaled_dot_product_attention(q, q, q, attn_mask=three_d).grad_fn).__name__
    with pytest.raises(RuntimeError, match="No available kernel"):
        tcf._flash(q, q, q, attn_mask=three_d)
    assert tcf.THREE_D_MASK_REFUSED and tcf.MASK_GRAD_REFUSED
    # No other fused backend has a CPU kernel in this release: flash is the only one to register.
    assert tcf.NO_OTHER_CPU_BACKEND


@pytest.mark.parametrize(
    ("mask", "two_d", "shape"),
    [
        (Mask(lengths=Lengths(kv=(5, 9))), False, (2, 1, 1, 12)),  # key padding
        (Mask(lengths=Lengths(q=(3, 0))), False, (2, 1, 4, 1)),  # query padding: a last dim of 1
        (Mask(causal="bottom_right"), False, (1, 1, 4, 12)),
        (Mask(causal="bottom_right"), True, (4, 12)),
        (Mask(heads=(Mask(window=Window(1, 1)), Mask(causal="top_left"))), True, (1, 2, 4, 12)),
        (Mask(segments=Segments(q=(((0, 4),), ((1, 4),)), kv=(((0, 12),), ((0, 6), (1, 6))))), True, (2, 1, 1, 12)),
    ],
)
def test_compact_masks_broadcast_to_the_dense_mask(mask: Mask, two_d: bool, shape: tuple[int, ...]) -> None:
    case = Case(batch=2, q_heads=2, kv_heads=1, q_len=4, kv_len=12, head_dim=8, mask=mask)
    from harness.core.inputs import make_inputs

    visible = make_inputs(case).visible
    got = tcf.compact(visible, two_d=two_d)
    assert got.shape == shape
    assert (np.broadcast_to(got, visible.shape) == visible).all()


def test_layouts_keep_values_and_take_the_strides_of_real_callers() -> None:
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    for layout in tcf.LAYOUTS:
        got = tcf.arrange(q, k, v, layout)
        assert all(torch.equal(a, b) for a, b in zip(got, (q, k, v), strict=True))
        if layout != "contiguous":
            assert got[0].stride() == (6 * 4 * 8, 8, 4 * 8, 1)  # a [B, T, N, H] tensor, transposed
    packed = tcf.arrange(q, k, v, "packed_kv")
    assert packed[1].untyped_storage().data_ptr() == packed[2].untyped_storage().data_ptr()


# One case per API option, each against the truth, forward and backward: bool and additive masks, finfo.min
# rows with no key (declared by the probe, checked as out[empty]), broadcast shapes, layouts, enable_gqa,
# is_causal and causal as a mask, float64.
OPTION_CASES = [
    dict(mask=Mask(causal="top_left"), blocks={}),
    dict(mask=Mask(causal="top_left"), blocks={"causal_mask": 1, "mask_form": 1, "layout": 1}),
    dict(mask=Mask(lengths=Lengths(q=(10, 0), kv=(50, 7))), blocks={"mask_form": 2, "mask_shape": 2, "gqa": 1}),
    dict(mask=Mask(lengths=Lengths(q=(10, 0))), blocks={"mask_form": 2, "mask_shape": 1}, dtype="float16"),
    dict(mask=Mask(lengths=Lengths(kv=(0, 7))), blocks={"mask_form": 1, "mask_shape": 1, "layout": 2}),
    dict(mask=Mask(causal="bottom_right"), bias=True, blocks={"mask_form": 3, "layout": 2}, dtype="bfloat16"),
    dict(mask=Mask(window=Window(3, 5)), blocks={"gqa": 1, "layout": 1}, dtype="float64"),
]


@pytest.mark.parametrize("kw", OPTION_CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw["blocks"].items()))
def test_each_api_option_matches_the_truth(kw: dict) -> None:
    if kw.get("dtype") == "float16" and (refused := isa.float16_refusal()):
        pytest.skip(refused)  # no float16 ruler at this --xla_cpu_max_isa: the harness refuses the case (exit 2)
    blocks = tuple(kw.pop("blocks").items())
    case = Case(batch=2, q_heads=4, kv_heads=2, q_len=16, kv_len=100, head_dim=32, blocks=blocks, **kw)
    assert FLASH.violations(case) == []
    result = run_case(case, [FLASH])
    subject = result.subjects[0]
    assert subject.passed, subject.failure
    if case.mask.lengths is not None:
        assert any(c.quantity == "out[empty]" for c in subject.comparisons)


def test_rows_with_no_visible_key_are_classified_as_measured() -> None:
    values = np.array([[1.0, -2.0], [3.0, 4.0]])
    assert classify_empty_row(np.zeros(2), values) == "zeros"
    assert classify_empty_row(values.mean(axis=0), values) == "uniform"
    assert classify_empty_row(np.array([1.5, 0.0]), values) == "convex"
    assert classify_empty_row(np.full(2, np.nan), values) == "nan"
    with pytest.raises(RuntimeError, match="outside the values' range"):
        classify_empty_row(np.array([9.0, 0.0]), values)
    # Every form and dtype was probed, and the kernel's declaration per case is the probe's.
    assert set(tcf.EMPTY_ROWS) == {
        (f, d) for f in tcf.MASK_FORMS for d in ("float32", "bfloat16", "float16", "float64")
    }
    case = Case(
        batch=1, q_heads=1, kv_heads=1, q_len=4, kv_len=8, head_dim=8, dtype="float16", mask=Mask(causal="bottom_right")
    )
    assert FLASH.empty_rows(case.replace(blocks=(("mask_form", 2),))) == tcf.EMPTY_ROWS[("finfo_min", "float16")]


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        (dict(blocks=(("layout", 3),)), "not options of this adapter"),
        (dict(blocks=(("block_q", 64),)), "not options of this adapter"),
        (dict(blocks=(("mask_form", 1),)), "a form or shape only"),  # no mask to pass
        (dict(bias=True, blocks=(("mask_form", 1),)), "a form or shape only"),  # a bool mask cannot carry a bias
        (dict(bias=True, blocks=(("mask_shape", 1),)), "a form or shape only"),
        (dict(mask=Mask(causal="bottom_right"), blocks=(("mask_form", 3),)), "a form or shape only"),  # = neg_inf
    ],
)
def test_options_that_do_not_fit_the_case_are_outside_the_contract(kw: dict, named: str) -> None:
    case = Case(batch=1, q_heads=2, kv_heads=1, q_len=16, kv_len=16, head_dim=32, **kw)
    assert any(named in v for v in FLASH.violations(case)), FLASH.violations(case)


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(strategies.cases(FLASH))
def test_drawn_cases_are_inside_the_contract(case: Case) -> None:
    assert FLASH.violations(case) == []


def test_a_float32_mask_with_float64_inputs_is_still_misread() -> None:
    # docs/findings/torch_cpu_flash_float32_mask_float64.md: turns red when torch fixes it, and the note
    # (its [releases], the float32 mask form's failures named by it) must then be updated. Its shrunk case, as
    # the fix proof replays it (one source: docs/findings/fixes/cases.py writes the file).
    case = load_failure(FIX_CASE).case
    result = run_case(case, [FLASH], grads=False)
    assert not result.subjects[0].passed
    assert result.subjects[0].comparisons[0].max_abs > 0.1


def test_a_finfo_min_row_backward_is_kv_len_times_its_gradient_said_in_words() -> None:
    # docs/findings/torch_cpu_flash_masked_row_backward.md: the rows are judged (empty_row_fill "added"), and the
    # failure says its error is on them alone, kv_len (16) times their gradient. Red when torch fixes it.
    case = load_failure(MASKED_ROW_CASE).case
    subject = run_case(case, [FLASH]).subjects[0]
    bad = {c.quantity: c.note for c in subject.comparisons if not c.passed}
    assert set(bad) == {"dq", "dk", "dv"}
    assert all(f"{emptygrads.ALONE}: 16x their declared value's gradient" in note for note in bad.values()), bad


def test_the_smoke_set_judges_rows_that_see_no_key_once_per_mask_form() -> None:
    case = Case(batch=1, q_heads=2, kv_heads=1, q_len=16, kv_len=16, head_dim=32, mask=Mask(lengths=Lengths(kv=(0,))))
    got = smoke.cotangent_cases(FLASH, [case])
    forms = [tcf.MASK_FORMS[c.block_dict.get("mask_form", 0)] for c in got]
    # float32 queries: the float32 form is the neg_inf form's call; each form's rows then get a cotangent.
    assert forms == ["neg_inf", "bool", "finfo_min"]
    assert all(empty_cotangent(c) and not FLASH.violations(c) for c in got)
