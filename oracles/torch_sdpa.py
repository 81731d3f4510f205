"""PyTorch scaled_dot_product_attention on CPU, gradients from autograd.

An oracle independent of JAX: a different framework, compiler and softmax. It receives
the same dense mask as every oracle, built from the case's mask description.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from harness.core import coverage as cov
from harness.core import extended
from harness.core.case import DTYPES, REGIMES, Case
from harness.core.contract import DENSE_ORACLE, About, Conventions, EmptyRows, Implementation, Outputs, register
from harness.core.inputs import Inputs
from harness.core.torchvjp import TORCH_DTYPES, classify_empty_row, repeat_kv, torch_outputs

API = (
    cov.Api(
        name="torch.nn.functional.scaled_dot_product_attention",
        locate=lambda: F.scaled_dot_product_attention,
        params=(
            cov.Param(name="query", drawn="[B, N, T, H] in the case dtype, on CPU", exercised=cov.always),
            cov.Param(name="key", drawn="[B, N, S, H] (k/v heads repeated)", exercised=cov.always),
            cov.Param(name="value", drawn="[B, N, S, H]", exercised=cov.always),
            cov.Param(
                name="attn_mask",
                drawn="the dense boolean mask, or the bias with -inf where masked",
                exercised=lambda case: case.bias or bool(case.mask.components),
            ),
            cov.Param(name="dropout_p", why="random: no deterministic truth to compare with"),
            cov.Param(name="is_causal", why="the adapter passes the dense mask instead: one path for every component"),
            cov.Param(name="scale", drawn="1/sqrt(H), 1.0, 0.25, 0.03", exercised=cov.explicit_scale),
            cov.Param(name="enable_gqa", why="the adapter repeats k/v heads (enable_gqa is torch >= 2.5 only)"),
        ),
    ),
)


MASK_FORMS = ("bool", "neg_inf")  # the attn_mask it is given: the visibility, or the bias with -inf where hidden


def _sdpa(q, k, v, bias, visible, scale):  # noqa: ANN001, ANN202 - torch tensors in, one out
    """The oracle's one call: `visible` [B or 1, H or 1, T, S] bool; the bias [.., T, S] or None."""
    if bias is not None:
        mask = bias.masked_fill(~visible, float("-inf"))
    else:
        mask = None if bool(visible.all()) else visible
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def _empty_rows_probe() -> dict[tuple[str, str], EmptyRows]:
    """(mask form, dtype) -> what the installed torch writes on a query row that sees no key, measured through
    `_sdpa` on a tiny case whose row 1 hides every key: each release's own convention, never assumed (torch
    2.4.1 writes NaN there, 2.5 on zeros: docs/history-torch.md, TH-1)."""
    out: dict[tuple[str, str], EmptyRows] = {}
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, 8, generator=g, dtype=torch.float64) for n in (4, 8, 8))
    visible = torch.ones(4, 8, dtype=torch.bool)
    visible[1] = False
    for dtype in (*DTYPES, "float64"):
        dt = TORCH_DTYPES[dtype]
        for form in MASK_FORMS:
            bias = torch.zeros(4, 8, dtype=dt) if form == "neg_inf" else None
            got = _sdpa(q.to(dt), k.to(dt), v.to(dt), bias, visible, None)
            out[(form, dtype)] = classify_empty_row(got.to(torch.float64).numpy()[0, 0, 1], v.numpy()[0, 0])
    return out


EMPTY_ROWS = _empty_rows_probe()


def _said() -> str:
    values = set(EMPTY_ROWS.values())
    if len(values) == 1:
        return f"{next(iter(values))} (every mask form and dtype)"
    return "; ".join(f"{f} {d}: {v}" for (f, d), v in EMPTY_ROWS.items())


class TorchSDPA(Implementation):
    name = "torch_sdpa"
    role = "oracle"
    framework = "torch"
    description = f"torch {torch.__version__} F.scaled_dot_product_attention on CPU"
    about = About(
        summary="torch SDPA on the CPU (its default backend there: flash attention, every dtype)",
        source="torch/nn/functional.py: scaled_dot_product_attention",
    )
    capabilities = dataclasses.replace(
        DENSE_ORACLE,
        dtypes=extended.with_float64(DENSE_ORACLE.dtypes),
        # F.scaled_dot_product_attention has no logits soft cap, no sinks and returns no
        # logsumexp: cases with a cap or sinks are outside its contract (violations), and it sits
        # them out; on residual cases its output is checked and no residual.
        soft_cap=False,
        sinks=False,
        residuals=False,
        # Not the offset regime: its CPU backward loses float32 precision on rows ~1e5 from zero
        # (docs/findings/torch_sdpa_cpu_flash_lse_large_logits.md): there it would judge nothing.
        regimes=tuple(r for r in REGIMES if r != "offset"),
    )
    conventions = Conventions(
        bias="QK^T * scale + attn_mask (float mask)",
        causal="is_causal is top-left; the adapter passes the dense mask instead",
        gqa="k/v heads repeated in the adapter (enable_gqa is torch>=2.5 only)",
        # The float32 boolean mask's value; per case, empty_rows() gives the probed one.
        empty_rows=EMPTY_ROWS[("bool", "float32")],
        notes=f"a row that sees no key, probed in this torch: {_said()}",
    )
    api = API

    def empty_rows(self, case: Case) -> EmptyRows:
        return EMPTY_ROWS[("neg_inf" if case.bias else "bool", case.dtype)]

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        group = case.q_heads // case.kv_heads
        visible = torch.from_numpy(inputs.visible)

        def f(q, k, v, bias):
            return _sdpa(q, repeat_kv(k, group), repeat_kv(v, group), bias, visible, case.sm_scale)

        return torch_outputs(f, inputs, case.dtype, grads=grads)


register(TorchSDPA())
