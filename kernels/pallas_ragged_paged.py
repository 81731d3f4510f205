"""The Pallas TPU ragged paged-attention kernel (jax.experimental.pallas.ops.tpu.ragged_paged_attention).

Mixed prefill and decode: sequence b has q[b] new queries, the last q[b] positions of its
kv[b] keys, attending causally (bottom-right, per row) to its paged KV cache. The case is an
ordinary attention case: q_len and kv_len are the padded maxima, harness.core.masks.Lengths holds
q[b] <= kv[b] per row, and the mask is causal "bottom_right", which the dense mask aligns per
row at the valid lengths. The adapter packs the real queries of every row into the kernel's
ragged layout (cu_q_lens), scatters K and V into one combined page pool through a seeded,
non-identity page table (harness.core.paging; k at even, v at odd combined heads), and unpacks the
output. Padding query rows are not produced by the ragged layout: the adapter returns them
as NaN and declares that (empty_rows "nan"); the dense mask gives them no visible key.

Off a TPU the kernel runs under the TPU interpret mode, which cannot read through its reshaped K/V
buffer (nor make its masked stores into 3-D refs) on jax 0.10.2: kernels/_tpu_interpret_fix.py serves both,
applied in the process that runs the kernel only where its probe shows the installed interpreter lacking
them, and the conventions of every run under it say so (docs/findings/pallas_ragged_paged_interpreter.md).
The HLO ("fast") interpreter refuses the kernel (fast_gap, the same finding). Where it still cannot run,
`cannot_run` returns the interpreter's own error on a two-sequence probe, called as the harness calls probes
(a worker under the CLI), and `run` records the kernel as "cannot run here".

blocks: page_size, num_kv_pages_per_block, num_queries_per_block (both block sizes of the kernel),
  spare_pages, and optionally k_scale_exp / v_scale_exp = e: the pages hold K (V) times 2**-e and
  the kernel gets k_scale (v_scale) = 2**e, which it multiplies back in float32 before its matmuls.
  A power of two scales exactly, so the mathematics is unchanged and a scale applied wrongly (or
  not at all) is off by 2**e. Optionally spare_tokens = n: the packed queries end in n NaN rows past
  cu_q_lens[num_seqs] (q is [max_num_batched_tokens, ...], padded as serving stacks pad it), which the
  kernel must ignore; a case with no queries at all gets one such row (an empty q is no call serving makes).
sliding window: the case's window in the SLIDING_WINDOW form (harness.core.masks), the last w keys up
  to each query's position, goes in as sliding_window=w.
soft cap (Case.soft_cap): soft_cap, where this release's signature has it.

`dropin(fn)` tests a replacement with the upstream signature:
    ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *, sm_scale,
                           sliding_window, soft_cap, k_scale, v_scale,
                           num_kv_pages_per_block, num_queries_per_block)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu import ragged_paged_attention as upstream

from harness.core import coverage as cov
from harness.core import paging, probes
from harness.core.case import Case
from harness.core.contract import About, Capabilities, Conventions, Outputs, Restriction, register
from harness.core.inputs import Inputs
from harness.core.masks import LENGTHS_Q_LE_KV, SHAPE_REQUIRED, SLIDING_WINDOW, Lengths, Mask
from harness.runtime import interpret
from kernels import _tpu_interpret_fix as interpret_fix
from kernels._pallas import TpuKernel, block_names

LAYOUT = ("page_size", "num_kv_pages_per_block", "num_queries_per_block", "spare_pages")
# Optional: the exponent e of a power-of-two k_scale / v_scale (module docstring).
SCALES = {"k_scale_exp": "k_scale", "v_scale_exp": "v_scale"}
# Optional: NaN query rows past the last sequence's (module docstring).
SPARE_TOKENS = "spare_tokens"
PAGE_SIZES = (8, 16, 32)
# Every restriction the adapter applies, with its source (harness.core.contract.Restriction).
_R = "jax/experimental/pallas/ops/tpu/ragged_paged_attention/kernel.py"
_Q_LE_KV = dict(upstream=_R, check="must be less or equal to {kv_len=}")
_CAUSAL = dict(upstream=_R, check="causal_mask = row_ids < col_ids")
_SLIDING = dict(upstream=_R, check="row_ids - sliding_window >= col_ids")
RESTRICTIONS = (
    Restriction(on="dtypes", rule="no float16", choice="no TPU matmul type"),
    Restriction(on="head_dims", rule="the values drawn", choice="no head_dim check upstream"),
    Restriction(on="q_lens", rule="the queries per sequence drawn", choice="any up to kv_len upstream"),
    Restriction(on="mask_components", rule="its parameters, always causal", probe="API"),
    Restriction(on="restrictions:lengths_q_le_kv", rule="q[b] <= kv[b]", **_Q_LE_KV),
    Restriction(on="restrictions:shape_required", rule="always causal at the end", **_CAUSAL),
    Restriction(on="restrictions:sliding_window", rule="a window only as a sliding window", **_SLIDING),
    Restriction(on="grads", rule="forward only", choice="the module defines no backward pass"),
    Restriction(on="violations", rule="causal bottom-right", **_CAUSAL),
    Restriction(on="violations", rule="q_len <= kv_len", **_Q_LE_KV),
    Restriction(on="violations", rule="row by row q[b] <= kv[b]", **_Q_LE_KV),
    Restriction(on="violations", rule="blocks name the page layout", probe="API"),
    Restriction(on="violations", rule="a window at every sequence's diagonal", **_SLIDING),
    Restriction(on="violations", rule="sliding_window and soft_cap where the signature has them", probe="API"),
)


@st.composite
def _layout(draw: Any, case: Case) -> dict[str, int]:
    page_size = draw(st.sampled_from(PAGE_SIZES))
    pages = -(-case.kv_len // page_size)
    layout = {
        "page_size": page_size,
        # Any count up to the pages a sequence has ("must be in range (0, pages_per_seq]").
        "num_kv_pages_per_block": draw(st.integers(1, pages)),
        "num_queries_per_block": draw(st.sampled_from((8, 16, 32))),
        "spare_pages": draw(st.integers(1, 3)),
    }
    for name in SCALES:
        if draw(st.booleans()):
            layout[name] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        # Up to a whole query block of padding: the last block may hold nothing else.
        layout[SPARE_TOKENS] = draw(st.integers(1, layout["num_queries_per_block"]))
    return layout


API = (
    cov.Api(
        name="ragged_paged_attention.ragged_paged_attention",
        locate=lambda: upstream.ragged_paged_attention,
        params=(
            cov.Param(
                name="q",
                drawn="[tokens, N, H]: the real queries of every row, packed, then spare_tokens NaN rows",
                exercised=cov.always,
            ),
            cov.Param(name="kv_pages", drawn="[pool, page_size, 2K, H], k and v interleaved", exercised=cov.always),
            cov.Param(name="kv_lens", drawn="per-row key lengths (0, 1, page-aligned, any)", exercised=cov.always),
            cov.Param(name="page_indices", drawn="a seeded non-identity page table", exercised=cov.always),
            cov.Param(
                name="cu_q_lens",
                drawn="cumulative per-row query lengths (0 to kv_lens)",
                exercised=cov.component("q_lengths"),
                why="counted: cases with per-row query lengths",
            ),
            cov.Param(name="num_seqs", drawn="the batch", exercised=cov.always),
            cov.scale_param(),
            cov.Param(
                name="sliding_window", drawn="w keys up to each query's diagonal", exercised=cov.component("window")
            ),
            cov.soft_cap_param("soft_cap"),
            cov.Param(name="mask_value", why=cov.NO_MASK_VALUE),
            cov.Param(
                name="k_scale",
                drawn="2**e (block k_scale_exp; pages hold K * 2**-e)",
                exercised=cov.block("k_scale_exp"),
            ),
            cov.Param(
                name="v_scale",
                drawn="2**e (block v_scale_exp; pages hold V * 2**-e)",
                exercised=cov.block("v_scale_exp"),
            ),
            cov.Param(
                name="num_kv_pages_per_block",
                drawn="1 to the pages per sequence",
                exercised=cov.block("num_kv_pages_per_block"),
            ),
            cov.Param(name="num_queries_per_block", drawn="8, 16, 32", exercised=cov.block("num_queries_per_block")),
            cov.Param(name="vmem_limit_bytes", why="a TPU on-chip memory budget; no numerical effect"),
        ),
    ),
)


class PallasRaggedPaged(TpuKernel):
    title = "Pallas TPU ragged paged attention"
    # The HLO interpreter's discharge rules take no Python-int index in a masked store
    # ("'TypedInt' object has no attribute 'shape'") and no strided load (the K/V split): measured on 0.10.2.
    fast_gap = "pallas_ragged_paged_interpreter"
    about = About(
        summary="the Pallas TPU ragged paged-attention kernel: packed queries of several lengths over paged K/V",
        source="jax/experimental/pallas/ops/tpu/ragged_paged_attention/kernel.py: ragged_paged_attention",
        # 10 smoke, 1 drawn: 0.02-3.5 CPU s a case, 9.8 to find the smoke set, under the patched TPU interpret
        # mode (benchmarks/results/matrix_budget.json). Cases drawn outside ci cost more: run --examples 20 --seed 1,
        # 135 CPU s.
        cases=11,
        blocks=(
            "page_size, num_kv_pages_per_block, num_queries_per_block, spare_pages, k_scale_exp / v_scale_exp, "
            "spare_tokens"
        ),
        notes="causal at each sequence's diagonal always; padding query rows are not in the ragged layout (NaN)",
        restrictions=RESTRICTIONS,
    )
    capabilities = Capabilities(
        # float16 is not a TPU matmul type.
        dtypes=("float32", "bfloat16"),
        head_dims=(128,),
        # q_len (the most queries a sequence brings) never past kv_len (the longest sequence).
        seq_lens=(16, 64, 128),
        q_lens=(1, 8, 16),
        # Queries are the last q[b] positions of each sequence (LENGTHS_Q_LE_KV), causal at the end.
        # Always causal (SHAPE_REQUIRED: every drawn mask is causal_bottom_right).
        # With SLIDING_WINDOW, sometimes a sliding window on top of the causal mask.
        mask_components=frozenset({"causal_bottom_right", "q_lengths", "kv_lengths", "window"}),
        restrictions=frozenset({LENGTHS_Q_LE_KV, SHAPE_REQUIRED, SLIDING_WINDOW}),
        max_batch=3,
        grads=False,
        dbias=False,
    )
    declared = Conventions(
        bias="none: the kernel takes no additive bias",
        causal="bottom-right per sequence: the q[b] queries are the last q[b] of its kv[b] keys",
        gqa="native: num_q_heads a multiple of num_kv_heads",
        empty_rows="nan",
        # each sequence its own grid cells; every grid axis "arbitrary", so run in order
        reproducible=True,
        batch_invariant=True,
        notes=(
            "ragged layout: queries packed [tokens, q_heads, head_dim] with cu_q_lens; kv pages combined "
            "[pages, page_size, 2 * kv_heads, head_dim]. Padding query rows do not exist in that layout: "
            "the adapter returns them as NaN (declared). Forward only (no VJP upstream)"
        ),
    )
    api = API

    def __init__(self, fn: Callable[..., Any] | None = None, name: str = "pallas_ragged_paged") -> None:
        super().__init__(fn, name, upstream=upstream.ragged_paged_attention)
        # A soft cap is drawn where this release's (or the drop-in's) signature takes one.
        self.capabilities = dataclasses.replace(self.capabilities, soft_cap=cov.accepts(self.fn, "soft_cap"))

    @property
    def conventions(self) -> Conventions:  # type: ignore[override]
        """The declared conventions, and where this process serves the kernel through the interpreter fix,
        that fact (so run.json, written from these, names the patched interpreter)."""
        note = _fix_note()
        if note is None or note in self.declared.notes:
            return self.declared
        return dataclasses.replace(self.declared, notes=f"{self.declared.notes}; {note}")

    @conventions.setter
    def conventions(self, conventions: Conventions) -> None:
        """A run's conventions (Implementation.with_conventions: refined by the exactness probe, read from
        these, so the fix's note may be in them already: it is said once)."""
        self.declared = conventions

    def cannot_run(self) -> str | None:
        if self.native():
            return None
        key = self.fn
        if key not in _REFUSALS:
            _REFUSALS[key] = probes.call(self, PROBE, grads=False, interpreter="faithful").refusal
        return _REFUSALS[key]

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return _layout(case)

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        if case.mask.causal != "bottom_right":
            out.append(f"mask causal={case.mask.causal!r} must be 'bottom_right' (the kernel is always causal)")
        if case.q_len > case.kv_len:
            out.append(f"q_len={case.q_len} must be <= kv_len={case.kv_len} (queries are the last positions)")
        q_lens, kv_lens = _lengths(case)
        if any(q > kv for q, kv in zip(q_lens, kv_lens, strict=True)):
            out.append(f"query lengths {q_lens} must not exceed key lengths {kv_lens} row by row")
        blocks = case.block_dict
        names = block_names(blocks, need=LAYOUT, may=(*SCALES, SPARE_TOKENS)) if blocks else None
        if names:
            out.append(names)
        if case.mask.window is not None and _sliding_window(case) is None:
            out.append(
                f"window {case.mask.window!r} is not a sliding window at every sequence's diagonal "
                f"(Window(left=w - 1, right=0, offset={case.kv_len - case.q_len}), kv[b] - q[b] the same offset)"
            )
        wanted = {"sliding_window": case.mask.window, "soft_cap": case.soft_cap}
        for parameter, value in wanted.items():
            if value is not None and not cov.accepts(self.fn, parameter):
                out.append(f"{self.name} has no {parameter} parameter on this release")
        return out

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        if not self.native() and interpret.interpret_options().interpreter == "faithful":
            status = interpret_fix.ensure()
            if status.error is not None:
                raise interpret.InterpreterUnavailable(status.error)
        blocks = case.block_dict or {"page_size": 16, "num_kv_pages_per_block": 1, "num_queries_per_block": 16}
        blocks.setdefault("spare_pages", 1)
        q_lens, kv_lens = _lengths(case)
        table = paging.page_table(case, page_size=blocks["page_size"], spare_pages=blocks["spare_pages"])
        # Combined pool [pages, page_size, 2 * kv_heads, head_dim]: k at even heads, v at odd.
        k_pool, v_pool = (
            # Pages hold x * 2**-e for a scale 2**e (exact): the kernel must multiply the scale back.
            paging.scatter(a, table, seed=case.seed * 2 + i) * a.dtype.type(2.0 ** -blocks.get(name, 0))
            for i, (a, name) in enumerate(zip((inputs.k, inputs.v), SCALES, strict=True))
        )
        pool = np.stack([k_pool, v_pool], axis=1).reshape(-1, *k_pool.shape[1:])  # [2 * kv_heads, ...]
        kv_pages = jnp.asarray(np.transpose(pool, (1, 2, 0, 3)))
        cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
        args = (
            jnp.asarray(np.asarray(kv_lens, np.int32)),
            jnp.asarray(table.indices),
            jnp.asarray(cu),
            jnp.asarray([case.batch], jnp.int32),
        )
        kw = {
            "sm_scale": case.sm_scale,
            "num_kv_pages_per_block": blocks["num_kv_pages_per_block"],
            "num_queries_per_block": blocks["num_queries_per_block"],
        }
        kw |= {parameter: 2.0 ** blocks[name] for name, parameter in SCALES.items() if name in blocks}
        # At least one row: with no queries at all, q would be empty, a zero-size pallas_call.
        spare = max(blocks.get(SPARE_TOKENS, 0), 1 if cu[-1] == 0 else 0)
        if case.mask.window is not None:
            kw["sliding_window"] = _sliding_window(case)
        if case.soft_cap is not None:
            kw["soft_cap"] = case.soft_cap

        def f(q, k, v):
            # Pack the real queries: [batch, q_heads, q_len, d] -> [tokens, q_heads, d].
            real = [jnp.swapaxes(q[b, :, :n], 0, 1) for b, n in enumerate(q_lens)]
            padding = jnp.full((spare, case.q_heads, case.head_dim), jnp.nan, q.dtype)
            packed = jnp.concatenate([*real, padding])
            out = self.fn(packed, kv_pages, *args, **kw)
            rows = []
            for b, n in enumerate(q_lens):
                real = jnp.swapaxes(out[cu[b] : cu[b] + n], 0, 1)
                pad = jnp.full((case.q_heads, case.q_len - n, case.head_dim), jnp.nan, out.dtype)
                rows.append(jnp.concatenate([real, pad], axis=1))
            return jnp.stack(rows)

        return self.outputs(f, inputs, grads=False)


def _sliding_window(case: Case) -> int | None:
    """The window size w of a case whose window is the SLIDING_WINDOW form, else None."""
    window = case.mask.window
    diagonal = case.kv_len - case.q_len
    if window is None or window.left is None or window.right != 0 or window.offset != diagonal:
        return None
    q_lens, kv_lens = _lengths(case)
    if any(q and kv - q != diagonal for q, kv in zip(q_lens, kv_lens, strict=True)):
        return None
    return window.left + 1


def _lengths(case: Case) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lengths = case.mask.lengths or Lengths(kv=(case.kv_len,) * case.batch)
    q = lengths.q if lengths.q is not None else (case.q_len,) * case.batch
    return q, paging.kv_ends(case)


# The probe: two sequences, one decode query and one of two prefill queries, two pages each.
PROBE = Case(
    batch=2,
    q_heads=2,
    kv_heads=1,
    q_len=2,
    kv_len=16,
    head_dim=128,
    mask=Mask(causal="bottom_right", lengths=Lengths(q=(1, 2), kv=(9, 16))),
    blocks={"page_size": 8, "num_kv_pages_per_block": 1, "num_queries_per_block": 8, "spare_pages": 1},
)


# The faithful interpreter's refusal of each function under test (None: it runs), probed once per process.
_REFUSALS: dict[Callable[..., Any], str | None] = {}


@functools.cache
def _fix_note() -> str | None:
    """What the records of this process's runs say of the interpreter fix: its note where it is applied here
    (off a TPU, the installed interpreter failing its probe), else None."""
    if PallasRaggedPaged.native():
        return None
    return interpret_fix.ensure().note()


# What interpreters() probes the HLO interpreter on: PROBE with a query length the contract draws.
PallasRaggedPaged.probe_case = PROBE.replace(
    q_len=8, mask=Mask(causal="bottom_right", lengths=Lengths(q=(1, 8), kv=(9, 16)))
)


def dropin(fn: Callable[..., Any], *, name: str) -> PallasRaggedPaged:
    """Test `fn`, a function with the upstream ragged_paged_attention signature, as this kernel."""
    return PallasRaggedPaged(fn, name=name)


register(PallasRaggedPaged())
