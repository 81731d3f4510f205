"""torch's fused CPU attention kernel as a kernel under test: F.scaled_dot_product_attention forced onto its
FLASH_ATTENTION backend (aten::_scaled_dot_product_flash_attention_for_cpu and its backward).

The `torch_sdpa` oracle calls the same function with torch's default choice, which on the CPU is this very
kernel (torch._fused_sdp_choice answers FLASH_ATTENTION for every dtype): here it is held to the truth as a
kernel, through the API as its users call it. `sdpa_kernel([FLASH_ATTENTION])` around every call means a
call the kernel cannot take raises ("No available kernel") instead of falling back to the math path.
torch's other fused backends (EFFICIENT_ATTENTION, CUDNN_ATTENTION, OVERRIDEABLE) have no CPU kernel:
forced alone on a CPU tensor they raise (NO_OTHER_CPU_BACKEND, probed at import), so flash is the only one.

The case says what is computed; its `blocks` say how the call is written (they never change the mathematics,
only, for `mask_form`, the declared value of rows that see no key). Each is an index into its list below,
absent for the first (a block size is positive):
  mask_form   how the mask goes in as attn_mask: 0 additive with -inf in the case dtype, 1 bool (True =
              visible), 2 additive with torch.finfo(dtype).min in the case dtype (transformers' padding masks),
              3 additive float32 with -inf whatever the query dtype (the "or float" sdpa's input check admits;
              nn.Transformer.generate_square_subsequent_mask's dtype). With a bias: the bias with the fill
              (not with a float64 case's bias, which float32 would round).
  mask_shape  0 the full [B, Hq, T, S]; 1 the smallest broadcastable shape holding it (a 1 where the mask is
              the same along an axis: [B, 1, 1, S] for key padding, [B, 1, T, 1] for query padding,
              [1, Hq, T, S] per head); 2 as 1, with [1, 1, T, S] passed 2-D as [T, S].
  layout      0 contiguous [B, N, T, H]; 1 q, k and v with the strides of [B, T, N, H] tensors transposed, as
              a model that projects to [B, T, N*H] and views heads passes them; 2 as 1, with k and v two
              slices of one packed [B, S, 2, N, H] tensor (a fused kv projection).
  gqa         1: enable_gqa=True with the kv heads as they are; absent: the adapter repeats them.
  causal_mask 1: top-left causal passed as the mask, not as is_causal=True (which it is when causal is the
              whole mask). is_causal never comes with an attn_mask: the documented API raises on that pair.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

from harness.core import coverage as cov
from harness.core import extended
from harness.core.case import DTYPES, REGIMES, Case
from harness.core.contract import (
    About,
    Capabilities,
    Conventions,
    EmptyRows,
    Implementation,
    Outputs,
    Restriction,
    register,
)
from harness.core.inputs import Inputs
from harness.core.masks import MASK_COMPONENTS
from harness.core.torchvjp import TORCH_DTYPES, classify_empty_row, repeat_kv, torch_outputs

FORCED = (SDPBackend.FLASH_ATTENTION,)
MASK_FORMS = ("neg_inf", "bool", "finfo_min", "float32")
MASK_SHAPES = ("full", "compact", "compact_2d")
LAYOUTS = ("contiguous", "transposed", "packed_kv")
# What the installed scaled_dot_product_attention takes, read from its documented signature, not its version
# (enable_gqa came in torch 2.5).
PARAMETERS = frozenset(cov.parameters(F.scaled_dot_product_attention))


def _flash(q, k, v, **kw):  # noqa: ANN001, ANN003, ANN202 - torch tensors in, one out
    with sdpa_kernel(list(FORCED)):
        return F.scaled_dot_product_attention(q, k, v, **kw)


def _refuses(fn: Callable[[], Any]) -> bool:
    """Whether the forced call raises (torch's "No available kernel"): the kernel refuses, nothing falls back."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns why before it raises
            fn()
    except RuntimeError:
        return True
    return False


def _tiny(dtype: torch.dtype = torch.float32, *, kv_len: int = 24) -> tuple[torch.Tensor, ...]:
    """q [1, 2, 4, 8] and k, v [1, 2, kv_len, 8], unit normal, for the probes."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 4, 8, generator=g).to(dtype)
    k, v = (torch.randn(1, 2, kv_len, 8, generator=g).to(dtype) for _ in range(2))
    return q, k, v


def _other_cpu_backends() -> bool:
    """Whether every fused backend but flash refuses a CPU call when forced alone (none has a CPU kernel)."""
    q, k, v = _tiny()
    others = [b for b in SDPBackend.__members__.values() if b not in (*FORCED, SDPBackend.MATH, SDPBackend.ERROR)]

    def forced(backend: SDPBackend) -> Callable[[], Any]:
        def call() -> Any:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v)

        return call

    return all(_refuses(forced(b)) for b in others)


def _gqa_taken() -> bool:
    """Whether the kernel takes enable_gqa=True with fewer kv heads than query heads. Having the parameter is
    not enough: torch 2.5.1's CPU flash refuses unequal head counts ("both fused kernels require query, key
    and value to have the same num_heads", measured in the torch history cell), so it is probed."""
    if "enable_gqa" not in PARAMETERS:
        return False
    q, k, v = _tiny()
    return not _refuses(lambda: _flash(q, k[:, :1], v[:, :1], enable_gqa=True))


def _mask_grad_refused() -> bool:
    """Whether the kernel refuses an attn_mask that requires grad: it computes no gradient for the mask."""
    q, k, v = _tiny()
    mask = torch.zeros(4, 24, requires_grad=True)
    return _refuses(lambda: _flash(q, k, v, attn_mask=mask))


def _three_d_mask_refused() -> bool:
    """Whether the kernel refuses a 3-D attn_mask ([Hq, T, S]), which the math path broadcasts."""
    q, k, v = _tiny()
    return _refuses(lambda: _flash(q, k, v, attn_mask=torch.ones(2, 4, 24, dtype=torch.bool)))


def _empty_rows_probe() -> dict[tuple[str, str], EmptyRows]:
    """(mask_form, dtype) -> what the kernel writes on a query row that sees no key, measured on a tiny case
    whose row 1 hides every key (unit-normal logits): each release's own convention, never assumed.
    8 keys, fewer than a float64 vector of float32 mask values spans: a float32 mask on float64 queries is
    misread from 16 keys on (FLOAT32_MASK_FINDING), a bug of its own, not this convention."""
    out: dict[tuple[str, str], EmptyRows] = {}
    for dtype in (*DTYPES, "float64"):
        dt = TORCH_DTYPES[dtype]
        q, k, v = _tiny(dt, kv_len=8)
        visible = torch.ones(4, 8, dtype=torch.bool)
        visible[1] = False
        for form in MASK_FORMS:
            got = _flash(q, k, v, attn_mask=attn_mask(visible, None, form, dt))
            values = v.to(torch.float64).numpy()[0]
            # Every head's row 1 sees nothing; the first head's kv head 0 holds its values.
            out[(form, dtype)] = classify_empty_row(got.to(torch.float64).numpy()[0, 0, 1], values[0])
    return out


def attn_mask(visible: torch.Tensor, bias: torch.Tensor | None, form: str, dtype: torch.dtype) -> torch.Tensor:
    """The mask as `form` (MASK_FORMS) writes it: bool visibility, or additive (the bias where given, else 0)
    with a fill on hidden keys, in the query dtype (float32 for the "float32" form)."""
    if form == "bool":
        if bias is not None:
            raise ValueError("mask_form='bool' cannot carry a bias; use an additive form")
        return visible
    mask_dtype = torch.float32 if form == "float32" else dtype
    fill = torch.finfo(mask_dtype).min if form == "finfo_min" else float("-inf")
    base = torch.zeros(visible.shape, dtype=mask_dtype) if bias is None else bias.to(mask_dtype)
    return base.masked_fill(~visible, fill)


def compact(visible: np.ndarray, *, two_d: bool) -> np.ndarray:
    """`visible` [B, H, T, S] cut to 1 along every axis it does not vary on (a broadcastable mask of the same
    meaning); with two_d, a [1, 1, T', S'] result as [T', S']."""
    out = visible
    for axis in range(4):
        first = np.take(out, [0], axis=axis)
        if (out == first).all():
            out = first
    return out[0, 0] if two_d and out.shape[:2] == (1, 1) else out


def api() -> cov.Api:
    """Every parameter of F.scaled_dot_product_attention, as this adapter drives it."""
    gqa = (
        cov.Param(name="enable_gqa", drawn="True (kv heads as they are), False (repeated)", exercised=_opt("gqa"))
        if ENABLE_GQA
        else cov.Param(name="enable_gqa", why=f"{_NO_GQA}: the adapter repeats k/v heads")
    )
    layouts = "contiguous, or with the strides of [B, T, N, H] (k and v maybe slices of one packed tensor)"
    return cov.Api(
        name="torch.nn.functional.scaled_dot_product_attention",
        locate=lambda: F.scaled_dot_product_attention,
        params=(
            *cov.arrays(
                f"[B, N, T, H] on the CPU: {layouts}",
                "[B, K, S, H]: K divides N with enable_gqa, else repeated to N",
                "[B, K, S, H]",
                names=("query", "key", "value"),
            ),
            cov.Param(
                name="attn_mask",
                drawn="additive -inf, bool, finfo(dtype).min or float32 -inf; full or broadcast (4-D, 2-D)",
                exercised=_passes_mask,
            ),
            cov.Param(name="dropout_p", why="random: no deterministic truth to compare with"),
            cov.Param(name="is_causal", drawn="True (causal alone), False", exercised=_is_causal),
            cov.scale_param("scale"),
            gqa,
        ),
    )


_NO_GQA = (
    "this torch has none"
    if "enable_gqa" not in PARAMETERS
    else "the kernel refuses fewer kv heads than query heads in this torch (probed)"
)


def _opt(name: str) -> cov.Exercised:
    return lambda case: case.block_dict.get(name, 0) > 0


def _is_causal(case: Case) -> bool:
    """Whether the call passes is_causal=True: top-left causal is the whole mask, no bias, not as a mask."""
    return case.mask.components == {"causal_top_left"} and not case.bias and "causal_mask" not in case.block_dict


def _passes_mask(case: Case) -> bool:
    """Whether the call passes an attn_mask (any mask but causal passed as is_causal, or a bias)."""
    return case.bias or (bool(case.mask.components) and not _is_causal(case))


class TorchCPUFlash(Implementation):
    role = "kernel"
    framework = "torch"

    def __init__(self, name: str, fn: Callable[..., torch.Tensor] | None = None) -> None:
        self.name = name
        self.fn = fn
        self.capabilities = CAPABILITIES
        self.conventions = CONVENTIONS
        self.about = ABOUT
        self.api = (api(),)
        self.description = f"torch {torch.__version__} F.scaled_dot_product_attention forced to FLASH_ATTENTION on CPU"
        if fn is not None:
            self.description += f" drop-in {name}"

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        # Indices drawn from 0 (the default, shrunk to); those of 0 are left out of the blocks (_named).
        draws: dict[str, st.SearchStrategy[int]] = {"layout": st.sampled_from(range(len(LAYOUTS)))}
        if ENABLE_GQA:
            draws["gqa"] = st.sampled_from((0, 1))
        if case.mask.components == {"causal_top_left"} and not case.bias:
            draws["causal_mask"] = st.sampled_from((0, 1))
        return st.fixed_dictionaries(draws).flatmap(lambda d: self._mask_options(case, d))

    def _mask_options(self, case: Case, drawn: dict[str, int]) -> st.SearchStrategy[dict[str, int]]:
        if not _passes_mask(case.replace(blocks=tuple(_named(drawn).items()))):
            return st.just(_named(drawn))
        forms = [i for i, f in enumerate(MASK_FORMS) if _form_drawn(f, case)]
        shapes = range(len(MASK_SHAPES)) if not case.bias else (0,)
        options = st.fixed_dictionaries({"mask_form": st.sampled_from(forms), "mask_shape": st.sampled_from(shapes)})
        return options.map(lambda o: _named(drawn | o))

    def empty_rows(self, case: Case) -> EmptyRows:
        # Without an attn_mask (none, or is_causal top-left) no row is empty; the default form's value then.
        return EMPTY_ROWS[(MASK_FORMS[case.block_dict.get("mask_form", 0)], case.dtype)]

    def empty_row_fill(self, case: Case) -> str | None:
        # Where rows are uniform (the finfo_min form), finfo.min is added to the logits. Judged: the installed
        # backward gives kv_len times that gradient there (docs/findings/torch_cpu_flash_masked_row_backward.md,
        # torch 2.13.0 and 2.15.0), a failure the run names by that finding (harness.running.known).
        return "added"

    def mask_forms(self, case: Case) -> dict[str, Case]:
        if not _passes_mask(case):
            return {"": case}
        forms = {}
        for i, form in enumerate(MASK_FORMS):
            candidate = case.replace(blocks=tuple(_named(case.block_dict | {"mask_form": i}).items()))
            if _consistent(candidate):
                forms[form] = candidate
        return forms

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        blocks = case.block_dict
        if "gqa" in blocks and not ENABLE_GQA:
            out.append("enable_gqa: the installed kernel refuses fewer kv heads than query heads (ENABLE_GQA)")
            blocks = {k: v for k, v in blocks.items() if k != "gqa"}
        bad = {k: v for k, v in blocks.items() if k not in OPTIONS or not 0 < v < OPTIONS[k]}
        if bad:
            out.append(f"blocks {bad} are not options of this adapter (name: number of values): {OPTIONS}")
        elif not _consistent(case):
            out.append(f"blocks {blocks}: a form or shape only with an attn_mask, drawn for its dtype and bias")
        return out

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        blocks = case.block_dict
        dt = TORCH_DTYPES[case.dtype]
        group = case.q_heads // case.kv_heads
        gqa = bool(blocks.get("gqa"))
        layout = LAYOUTS[blocks.get("layout", 0)]
        kw: dict[str, Any] = {"scale": case.sm_scale}
        if gqa:
            kw["enable_gqa"] = True
        if _is_causal(case):
            kw["is_causal"] = True
        elif _passes_mask(case):
            form = MASK_FORMS[blocks.get("mask_form", 0)]
            shape = MASK_SHAPES[blocks.get("mask_shape", 0)]
            visible = inputs.visible if shape == "full" else compact(inputs.visible, two_d=shape == "compact_2d")
            bias = None if inputs.bias is None else torch.from_numpy(np.asarray(inputs.bias, np.float64)).to(dt)
            # Never requires grad: the kernel refuses a mask that does (MASK_GRAD_REFUSED), so no dbias.
            kw["attn_mask"] = attn_mask(torch.from_numpy(np.ascontiguousarray(visible)), bias, form, dt)
        fn = self.fn or _flash

        def f(q, k, v, _bias):  # noqa: ANN001, ANN202 - torch tensors
            if not gqa:
                k, v = repeat_kv(k, group), repeat_kv(v, group)
            q, k, v = arrange(q, k, v, layout)
            return fn(q, k, v, **kw)

        return torch_outputs(f, dataclasses.replace(inputs, bias=None), case.dtype, grads=grads)


def arrange(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str) -> tuple[torch.Tensor, ...]:
    """q, k, v [B, N, L, H] with the same values in `layout`'s strides (LAYOUTS); differentiable."""
    if layout == "contiguous":
        return q, k, v
    bthd = lambda t: t.transpose(1, 2).contiguous().transpose(1, 2)  # noqa: E731
    if layout == "transposed":
        return bthd(q), bthd(k), bthd(v)
    packed = torch.stack([k.transpose(1, 2), v.transpose(1, 2)], dim=2)  # [B, S, 2, K, H]
    return bthd(q), packed[:, :, 0].transpose(1, 2), packed[:, :, 1].transpose(1, 2)


def _named(options: dict[str, int]) -> dict[str, int]:
    """Drawn option indices as blocks: the first of each (0) is left out, a block size being positive."""
    return {k: v for k, v in options.items() if v}


def _consistent(case: Case) -> bool:
    """Whether the case's mask options fit it: a form or shape only where a mask is passed, a form drawn for
    the case's dtype and bias, and only the full shape with a bias."""
    blocks = case.block_dict
    if not _passes_mask(case):
        return not {"mask_form", "mask_shape"} & set(blocks)
    return _form_drawn(MASK_FORMS[blocks.get("mask_form", 0)], case) and not (case.bias and "mask_shape" in blocks)


def _form_drawn(form: str, case: Case) -> bool:
    # A bool mask cannot carry a bias; a float32 mask on float32 queries is the neg_inf form; a float32 mask
    # cannot carry a float64 case's bias: rounded to float32, the kernel would be given another bias than the
    # truth's (1e-7 off against a float64 bound of 4e-14, a failure of the harness's making, measured).
    if form == "float32":
        return case.dtype != "float32" and not (case.bias and case.dtype == "float64")
    return not (form == "bool" and case.bias)


NO_OTHER_CPU_BACKEND = _other_cpu_backends()
ENABLE_GQA = _gqa_taken()
# Block names and their values: what `violations` accepts and `block_strategy` draws from.
OPTIONS: dict[str, int] = {"mask_form": len(MASK_FORMS), "mask_shape": len(MASK_SHAPES), "layout": len(LAYOUTS)}
OPTIONS |= {"causal_mask": 2} | ({"gqa": 2} if ENABLE_GQA else {})
MASK_GRAD_REFUSED = _mask_grad_refused()
THREE_D_MASK_REFUSED = _three_d_mask_refused()
EMPTY_ROWS = _empty_rows_probe()
OFFSET_FINDING = "docs/findings/torch_sdpa_cpu_flash_lse_large_logits.md"
FLOAT32_MASK_FINDING = "docs/findings/torch_cpu_flash_float32_mask_float64.md"

CAPABILITIES = Capabilities(
    # float64 where a truth wider than float64 exists here (harness.core.extended): the kernel takes it.
    dtypes=extended.with_float64(DTYPES),
    # Any head_dim runs (1 to 1024 probed); these are what is drawn.
    head_dims=(64, 32, 80, 128, 256),
    any_head_dim=True,
    # The kernel cuts queries into blocks of 32 (64 from 192 queries) and keys into blocks of 512: 520 keys
    # are two key blocks, the only way its online softmax rescales; 100 ends inside a query block.
    seq_lens=(16, 100, 128, 520),
    # Every mask is a dense attn_mask to it (is_causal for top-left causal alone).
    mask_components=frozenset(MASK_COMPONENTS | {"bias"}),
    dbias=not MASK_GRAD_REFUSED,
    # Not the offset regime: its backward restores p from a float32 logsumexp, which ~1e5 from zero keeps
    # ~1e-2 of precision (OFFSET_FINDING, measured on this kernel through the torch_sdpa oracle).
    regimes=tuple(r for r in REGIMES if r != "offset"),
)


def _said(form: str) -> str:
    by_dtype = {d: v for (f, d), v in EMPTY_ROWS.items() if f == form}
    if len(set(by_dtype.values())) == 1:
        return f"{form}: {next(iter(by_dtype.values()))}"
    return f"{form}: " + ", ".join(f"{d} {v}" for d, v in by_dtype.items())


_EMPTY = "; ".join(_said(form) for form in MASK_FORMS)
CONVENTIONS = Conventions(
    bias="QK^T * scale + attn_mask (a float mask is the bias, -inf or finfo.min where hidden)",
    causal="is_causal is top-left; other alignments go in as the mask",
    gqa="enable_gqa=True (kv heads divide query heads), or the adapter repeats k/v heads",
    empty_rows="zeros",
    # Work is split over (batch, head, query block) and each output is computed by one thread in a fixed
    # order; the backward sums a kv head's query heads in a loop.
    reproducible=True,
    batch_invariant=True,
    notes=f"rows with no visible key, per mask form and dtype, probed on this host: {_EMPTY}",
)
# The CPU checks are C++ (aten/src/ATen/native/transformers/sdp_utils_cpp.cpp), not in the wheel to quote
# from: each restriction is probed on the installed release instead.
ABOUT = About(
    summary="torch SDPA forced onto its fused CPU backend (FLASH_ATTENTION), forward and backward",
    source="torch/nn/functional.py: scaled_dot_product_attention (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp)",
    # 17 smoke, 3 drawn; 0.01-2.1 CPU s a case, 48 to find the smoke set (benchmarks/results/matrix_budget.json)
    cases=20,
    blocks="API options: mask_form, mask_shape, layout, gqa, causal_mask (the module's docstring)",
    # The empty rows' values are left out: torch picks its CPU kernels by the host's capability (AVX-512,
    # AVX2, ...), so the probe's answer is the host's, recorded with each run (Conventions.notes), never the page's.
    notes="the only fused torch backend with a CPU kernel (others refuse: probed); empty rows per mask form and "
    "dtype: probed on the host at each run (the finfo.min form differs by torch's CPU capability)",
    restrictions=(
        Restriction(on="dbias", rule="no gradient for attn_mask: a mask that requires grad", probe="MASK_GRAD_REFUSED"),
        Restriction(on="violations", rule="enable_gqa only where the kernel takes fewer kv heads", probe="ENABLE_GQA"),
        Restriction(on="head_dims", rule="the values drawn", choice="the kernel takes any head_dim"),
        Restriction(
            on="violations",
            rule="blocks are this adapter's options; 3-D masks are never built (refused)",
            probe="THREE_D_MASK_REFUSED",
        ),
        Restriction(on="violations", rule="mask options only with a mask that takes them", choice="the adapter's own"),
    ),
)
FLASH = TorchCPUFlash("torch_cpu_flash")
register(FLASH)


def dropin(fn: Callable[..., torch.Tensor], *, name: str) -> TorchCPUFlash:
    """Test `fn`, a function with the signature of F.scaled_dot_product_attention, as torch_cpu_flash
    (called without the backend forced: `fn` chooses)."""
    return TorchCPUFlash(name, fn=fn)
