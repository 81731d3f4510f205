"""The torch SDPA oracle: its convention on rows that see no key is probed from the installed torch, per mask
form and dtype, and each case is held to it."""

from __future__ import annotations

import pytest
import torch

from harness.core import contract
from harness.core.case import Case
from harness.core.masks import Lengths, Mask
from harness.running.runner import run_case
from oracles import torch_sdpa as ts

ORACLE = contract.resolve("torch_sdpa")


def _empty_row_writes(value: str):  # noqa: ANN202 - a fake of F.scaled_dot_product_attention
    """The real call, then `value` ("nan" or "uniform": the mean of v) written on every row that sees no key:
    what a release with another convention (torch 2.4.1: NaN) would give."""
    real = torch.nn.functional.scaled_dot_product_attention

    def fake(q, k, v, *, attn_mask=None, scale=None):  # noqa: ANN001, ANN202
        out = real(q, k, v, attn_mask=attn_mask, scale=scale)
        sees = attn_mask if attn_mask.dtype == torch.bool else ~torch.isinf(attn_mask)
        empty = ~sees.any(-1)[..., None]
        fill = torch.full_like(out, torch.nan) if value == "nan" else v.mean(-2, keepdim=True).expand_as(out)
        return torch.where(empty, fill, out)

    return fake


@pytest.mark.parametrize("value", ["nan", "uniform"])
def test_the_empty_row_convention_is_probed_not_assumed(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setattr(ts.F, "scaled_dot_product_attention", _empty_row_writes(value))
    probed = ts._empty_rows_probe()
    assert set(probed) == {(f, d) for f in ts.MASK_FORMS for d in ("float32", "bfloat16", "float16", "float64")}
    assert set(probed.values()) == {value}


@pytest.mark.parametrize("bias", [False, True])
def test_each_case_is_held_to_the_probed_convention(bias: bool) -> None:
    empty = Mask(lengths=Lengths(kv=(0, 7)))  # batch row 0 sees no key
    case = Case(batch=2, q_heads=2, kv_heads=1, q_len=16, kv_len=16, head_dim=8, bias=bias, mask=empty)
    assert ORACLE.empty_rows(case) == ts.EMPTY_ROWS[("neg_inf" if bias else "bool", "float32")]
    subject = run_case(case, [ORACLE]).subjects[0]
    assert subject.passed, subject.failure
    assert any(c.quantity == "out[empty]" for c in subject.comparisons)
