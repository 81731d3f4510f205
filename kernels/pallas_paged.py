"""The Pallas TPU paged-attention decode kernel (jax.experimental.pallas.ops.tpu.paged_attention).

One query per sequence attends to that sequence's KV cache, held in pages of a shared pool
and found through a page table. Native on a TPU, otherwise the same kernel code under the
Pallas TPU interpreter. The case is an ordinary attention case with q_len 1 and per-row key
lengths (harness.core.masks.Lengths); the adapter scatters the dense K/V into a pool through a
seeded, non-identity page table (harness.core.paging) and calls the kernel through its own API.
The oracles compute the truth from the dense K/V and never see pages.

blocks (the page layout; none changes the mathematics): page_size, pages_per_compute_block,
  spare_pages (pool pages no sequence uses), and flags present with value 1 (block sizes
  are positive): megacore_kv_head or megacore_batch (megacore_mode "kv_head" / "batch",
  absent: None; under the faithful interpreter on two simulated cores), split_seq_dim
  (inline_seq_dim=False; absent: the default True).
kv_format "int8": the pages are QuantizedTensor(int8 codes, scales) (quantization_utils); float32
  cases only so (float32 pages are computed at bfloat16 precision: docs/findings/pallas_paged_float32_pages_bf16.md).
soft cap (Case.soft_cap): passed as attn_logits_soft_cap where this release's signature has it.

`dropin(fn)` tests a replacement with the upstream signature:
    paged_attention(q, k_pages, v_pages, lengths, page_indices, *, mask_value,
                    attn_logits_soft_cap, pages_per_compute_block, megacore_mode, inline_seq_dim)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu import paged_attention as upstream
from jax.experimental.pallas.ops.tpu.paged_attention import quantization_utils

from harness.core import coverage as cov
from harness.core import paging
from harness.core.case import Case
from harness.core.contract import About, Capabilities, Conventions, Outputs, Restriction, register
from harness.core.inputs import Inputs, int8_grid
from harness.core.masks import Lengths, Mask
from harness.runtime import compat
from kernels._pallas import TpuKernel, block_names, divisors

PAGE_SIZES = (8, 16, 32, 64)
LAYOUT = ("page_size", "pages_per_compute_block", "spare_pages")
MEGACORE = {"megacore_kv_head": "kv_head", "megacore_batch": "batch"}
SPLIT = "split_seq_dim"
FLAGS = (*MEGACORE, SPLIT)
SOFT_CAP = "attn_logits_soft_cap"
# Every restriction the adapter applies, with its source (harness.core.contract.Restriction).
_P = "jax/experimental/pallas/ops/tpu/paged_attention/paged_attention_kernel.py"
_FLOAT32 = "docs/findings/pallas_paged_float32_pages_bf16.md"
RESTRICTIONS = (
    Restriction(on="dtypes", rule="no float16", choice="no TPU matmul type"),
    Restriction(on="kv_format_only_dtypes", rule="float32 only with int8 pages", finding=_FLOAT32),
    Restriction(on="head_dims", rule="the values drawn", choice="no head_dim check upstream"),
    Restriction(on="q_lens", rule="one query per sequence", upstream=_P, check="num_q_heads, head_dim = q.shape"),
    Restriction(on="mask_components", rule="lengths: its parameter", probe="API"),
    Restriction(on="grads", rule="forward only", choice="the module defines no backward pass"),
    Restriction(on="violations", rule="blocks name the page layout", probe="API"),
    Restriction(on="violations", rule="pages_per_compute_block divides pages", upstream=_P, check="pages per sequence"),
    Restriction(on="violations", rule="a soft cap where the signature takes it", probe="SOFT_CAP"),
    Restriction(on="violations", rule="flags are 1 or absent", choice="the adapter's own flags"),
    Restriction(on="violations", rule="one megacore mode", upstream=_P, check="megacore_mode must be one of"),
    Restriction(on="violations", rule="kv_head mode: even kv heads", upstream=_P, check="KV heads must be even"),
    Restriction(on="violations", rule="batch mode: even batch", upstream=_P, check="batch size must be even"),
)


# TPU cores the faithful interpreter simulates for a megacore mode: with the default one core the
# kernel waits forever for the second core's half of the grid; with two, both modes return and
# match megacore_mode=None exactly (docs/findings/pallas_paged_megacore_interpreter_hang.md:
# about 3 s a call). The fast interpreter runs the core axis as an ordinary sequential grid axis.
MEGACORE_CORES = 2


@st.composite
def _layout(draw: Any, case: Case) -> dict[str, int]:
    page_size = draw(st.sampled_from(PAGE_SIZES))
    pages = -(-case.kv_len // page_size)
    # "pages_per_compute_block must be divisible by pages per sequence" (upstream's check,
    # whose message has the two swapped: pages_per_sequence % pages_per_compute_block == 0).
    per_block = draw(st.sampled_from(divisors(pages)))
    layout = {"page_size": page_size, "pages_per_compute_block": per_block, "spare_pages": draw(st.integers(1, 3))}
    # megacore "kv_head" needs an even kv head count, "batch" an even batch (upstream checks);
    # under the faithful interpreter a megacore mode runs on MEGACORE_CORES simulated cores.
    modes = [None]
    modes += ["megacore_kv_head"] * (case.kv_heads % 2 == 0) + ["megacore_batch"] * (case.batch % 2 == 0)
    mode = draw(st.sampled_from(modes))
    if mode is not None:
        layout[mode] = 1
    if draw(st.booleans()):
        layout[SPLIT] = 1
    return layout


def _default_layout(case: Case) -> dict[str, int]:
    return {"page_size": 16, "pages_per_compute_block": 1, "spare_pages": 1}


API = (
    cov.Api(
        name="paged_attention.paged_attention",
        locate=lambda: upstream.paged_attention,
        params=(
            cov.Param(name="q", drawn="[B, N, H], scaled by the adapter", exercised=cov.always),
            cov.Param(
                name="k_pages",
                drawn="[K, pool, page_size, H] pages in the case dtype, or int8 QuantizedTensor pages",
                exercised=cov.kv_format("int8"),
                why="counted: cases with int8 pages; every other case passes plain pages",
            ),
            cov.Param(name="v_pages", drawn="as k_pages", exercised=cov.kv_format("int8"), why="counted as k_pages"),
            cov.Param(name="lengths", drawn="per-row key lengths (0, 1, page-aligned, any)", exercised=cov.always),
            cov.Param(name="page_indices", drawn="a seeded non-identity page table", exercised=cov.always),
            cov.Param(name="mask_value", why=cov.NO_MASK_VALUE),
            cov.soft_cap_param(SOFT_CAP),
            cov.Param(
                name="pages_per_compute_block",
                drawn="divisors of the pages per sequence",
                exercised=cov.block("pages_per_compute_block"),
            ),
            cov.Param(
                name="megacore_mode",
                drawn='None, "kv_head", "batch" (under the interpreter on two simulated cores)',
                exercised=lambda c: any(f in c.block_dict for f in MEGACORE),
                why="counted: cases with a megacore mode",
            ),
            cov.Param(
                name="inline_seq_dim", drawn="True, False", exercised=cov.block(SPLIT), why="counted: cases with False"
            ),
        ),
    ),
)


class PallasPaged(TpuKernel):
    title = "Pallas TPU paged attention"
    about = About(
        summary="the Pallas TPU paged-attention decode kernel (q_len 1), K/V in pages, also int8",
        source="jax/experimental/pallas/ops/tpu/paged_attention/paged_attention_kernel.py: paged_attention",
        cases=8,  # 6 smoke (megacore, extreme regimes); 1.1-1.7 CPU s a case (benchmarks/results/matrix_budget.json)
        blocks="page_size, pages_per_compute_block, spare_pages, split_seq_dim; the megacore modes (2 cores simulated)",
        notes="float32 only with int8 pages (plain float32 pages round to bfloat16); length-0 sequences are unwritten",
        restrictions=RESTRICTIONS,
    )
    capabilities = Capabilities(
        # float32 only with int8 pages: the kernel rounds float32 pages to bfloat16 before its float32
        # arithmetic (MultiPageAsyncCopyDescriptor._maybe_dequantize defaults to dtype=bfloat16), a
        # bfloat16-level error in a float32 case: docs/findings/pallas_paged_float32_pages_bf16.md.
        # int8 pages dequantize as codes * scales / 127.5 with float32 scales, which is float32.
        # float16 is not a TPU matmul type.
        dtypes=("bfloat16", "float32"),
        kv_format_only_dtypes=("float32",),
        head_dims=(128, 64),
        # kv_len is the longest sequence the table holds; q_len is 1 (one decode query per sequence).
        seq_lens=(64, 128, 256),
        q_lens=(1,),
        mask_components=frozenset({"kv_lengths"}),
        max_batch=3,
        max_group=8,
        grads=False,
        dbias=False,
        kv_formats=("int8",),
    )
    conventions = Conventions(
        bias="none: the kernel takes no additive bias",
        causal="none: one query per sequence sees its keys [0, length)",
        gqa="native: num_q_heads a multiple of num_kv_heads",
        empty_rows="unwritten",
        # each sequence its own grid cells (a megacore mode splits them between cores)
        reproducible=True,
        batch_invariant=True,
        notes=(
            "layout q [batch, q_heads, head_dim], pages [kv_heads, pool, page_size, head_dim]; no sm_scale "
            "argument: the adapter multiplies q by the scale (in the case dtype). A sequence of length 0 is "
            "skipped and its output block never written (zeros under the interpreter, whatever the buffer held "
            "on a TPU): declared unwritten, not checked. Forward only (no VJP upstream)"
        ),
    )
    api = API

    def __init__(self, fn: Callable[..., Any] | None = None, name: str = "pallas_paged") -> None:
        super().__init__(fn, name, upstream=upstream.paged_attention)
        # A soft cap is drawn where this release's (or the drop-in's) signature takes one.
        self.capabilities = dataclasses.replace(self.capabilities, soft_cap=cov.accepts(self.fn, SOFT_CAP))

    # One decode query per sequence, bfloat16 pages (float32 only with int8 pages).
    probe_case = Case(
        batch=1,
        q_heads=1,
        kv_heads=1,
        q_len=1,
        kv_len=64,
        head_dim=128,
        dtype="bfloat16",
        mask=Mask(lengths=Lengths(kv=(64,))),
    )

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return _layout(case)

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        if case.bias or case.mask.components - {"kv_lengths"}:
            return out
        blocks = case.block_dict or _default_layout(case)
        names = block_names(blocks, need=LAYOUT, may=FLAGS)
        if names:
            out.append(names)
            return out
        pages = -(-case.kv_len // blocks["page_size"])
        if pages % blocks["pages_per_compute_block"]:
            out.append(
                f"pages_per_compute_block={blocks['pages_per_compute_block']} must divide the "
                f"{pages} pages per sequence (kv_len={case.kv_len}, page_size={blocks['page_size']})"
            )
        if case.soft_cap is not None and not cov.accepts(self.fn, SOFT_CAP):
            out.append(f"{self.name} has no {SOFT_CAP} parameter on this release: soft-capped cases cannot run")
        flags = {f: v for f, v in blocks.items() if f in FLAGS}
        if any(v != 1 for v in flags.values()):
            out.append(f"flags {flags} must be 1 (present) or absent")
        if len(set(flags) & set(MEGACORE)) > 1:
            out.append(f"at most one of {sorted(MEGACORE)}")
        if "megacore_kv_head" in flags and case.kv_heads % 2:
            out.append(f"megacore_kv_head needs an even kv_heads, got {case.kv_heads}")
        if "megacore_batch" in flags and case.batch % 2:
            out.append(f"megacore_batch needs an even batch, got {case.batch}")
        return out

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        blocks = case.block_dict or _default_layout(case)
        table = paging.page_table(case, page_size=blocks["page_size"], spare_pages=blocks["spare_pages"])
        lengths = jnp.asarray(paging.kv_ends(case), jnp.int32)
        indices = jnp.asarray(table.indices)
        k_pages, v_pages = (self._pages(a, table, case, salt) for salt, a in enumerate((inputs.k, inputs.v)))
        scale = case.sm_scale
        kw = {
            "pages_per_compute_block": blocks["pages_per_compute_block"],
            "megacore_mode": next((mode for flag, mode in MEGACORE.items() if flag in blocks), None),
            "inline_seq_dim": SPLIT not in blocks,
        }
        if case.soft_cap is not None:
            kw[SOFT_CAP] = case.soft_cap

        def f(q, k, v):
            # The kernel applies no softmax scale; scaling q first is how its users apply one.
            q = q[:, :, 0, :] * jnp.asarray(scale, q.dtype)
            return self.fn(q, k_pages, v_pages, lengths, indices, **kw)[:, :, None, :]

        if kw["megacore_mode"] is None:
            return self.outputs(f, inputs, grads=False)
        cores = dataclasses.replace(compat.interpret_options(), cores=MEGACORE_CORES)
        with compat.using_interpret_options(cores):
            return self.outputs(f, inputs, grads=False)

    @staticmethod
    def _pages(x: np.ndarray, table: paging.PageTable, case: Case, salt: int) -> Any:
        """The pool for keys or values: plain pages, or int8 codes with per-token scales."""
        seed = case.seed * 2 + salt
        if case.kv_format != "int8":
            return jnp.asarray(paging.scatter(x, table, seed=seed))
        codes, step = int8_grid(x)
        # from_int8 computes codes * scales / MAX_INT8 (127.5) in float32: scales = step * 127.5
        # makes that exactly codes * step, the dequantized inputs the oracles see.
        scales = (step * quantization_utils.MAX_INT8).astype(np.float32)
        return quantization_utils.QuantizedTensor(
            weight=jnp.asarray(paging.scatter(codes, table, seed=seed)),
            scales=jnp.asarray(np.abs(paging.scatter(scales, table, seed=seed))),
        )


def dropin(fn: Callable[..., Any], *, name: str) -> PallasPaged:
    """Test `fn`, a function with the upstream paged_attention signature, as this kernel."""
    return PallasPaged(fn, name=name)


register(PallasPaged())
