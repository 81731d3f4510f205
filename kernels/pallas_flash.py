"""The Pallas TPU flash-attention kernel (jax.experimental.pallas.ops.tpu.flash_attention).

Native on a TPU, otherwise the same kernel code under the Pallas TPU interpreter.
`dropin(fn)` wraps any function with the upstream signature, so a team's fork is
tested exactly like the upstream kernel:
    flash_attention(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes)

The public function returns no residuals; the module's `_flash_attention(..., save_residuals=True,
...)` it wraps returns the output with each row's softmax sum `l` and max `m`, which the adapter
turns into the logsumexp m + log(l) and checks on residual cases: for the upstream kernel, and
for a drop-in whose module defines `_flash_attention` too (a patched copy of upstream does).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu import flash_attention as upstream

from harness.core import coverage as cov
from harness.core.case import DTYPES, Case
from harness.core.contract import About, Capabilities, Conventions, EmptyRows, Outputs, Restriction, register
from harness.core.inputs import Inputs
from kernels._pallas import LANES, TpuKernel, block_names, divisors, lane_tiles

# Tiles along a key axis must be whole multiples of the 128 TPU lanes (LANES): the kernel raises
# "block_k=... should be a multiple of 128" otherwise (flash_attention.py, MIN_BLOCK_SIZE; tests/test_contract.py).
FORWARD_BLOCKS = ("block_b", "block_q", "block_k_major", "block_k")
BACKWARD_BLOCKS = (
    "block_q_major_dkv",
    "block_k_major_dkv",
    "block_k_dkv",
    "block_q_dkv",
    "block_k_major_dq",
    "block_k_dq",
    "block_q_dq",
)


def uniform_blocks(tile: int = LANES, *, block_b: int = 1) -> dict[str, int]:
    """Every tile size set to `tile` (block_b apart): a complete, explicit tiling."""
    return {name: tile for name in FORWARD_BLOCKS + BACKWARD_BLOCKS} | {"block_b": block_b}


def _minor_of(major: int) -> st.SearchStrategy[int]:
    # A minor tile must divide its major tile (BlockSizes.__post_init__).
    return st.sampled_from(lane_tiles(major))


@st.composite
def _flash_blocks(draw: Any, case: Case) -> dict[str, int]:
    q_tiles, k_tiles = lane_tiles(case.q_len), lane_tiles(case.kv_len)
    # block_b need not divide batch in the forward pass, but a partial batch tile
    # reads past the array; keep to divisors.
    blocks = {"block_b": draw(st.sampled_from(divisors(case.batch))), "block_q": draw(st.sampled_from(q_tiles))}
    blocks["block_k_major"] = draw(st.sampled_from(k_tiles))
    blocks["block_k"] = draw(_minor_of(blocks["block_k_major"]))
    blocks["block_q_major_dkv"] = draw(st.sampled_from(q_tiles))
    blocks["block_q_dkv"] = draw(_minor_of(blocks["block_q_major_dkv"]))
    blocks["block_k_major_dkv"] = draw(st.sampled_from(k_tiles))
    blocks["block_k_dkv"] = draw(_minor_of(blocks["block_k_major_dkv"]))
    blocks["block_k_major_dq"] = draw(st.sampled_from(k_tiles))
    blocks["block_k_dq"] = draw(_minor_of(blocks["block_k_major_dq"]))
    blocks["block_q_dq"] = draw(st.sampled_from(q_tiles))
    return blocks


API = (
    cov.Api(
        name="flash_attention.flash_attention",
        locate=lambda: upstream.flash_attention,
        params=(
            *cov.arrays("[B, N, T, H] in the case dtype", "[B, N, S, H] (k/v heads repeated for GQA)", "[B, N, S, H]"),
            cov.Param(name="ab", drawn="float32 bias / scale, or None", exercised=cov.has_bias),
            cov.Param(
                name="segment_ids", drawn="SegmentIds(q, kv), orphan ids included", exercised=cov.component("segments")
            ),
            cov.Param(name="causal", drawn="True, False", exercised=cov.causal_top_left),
            cov.scale_param(),
            cov.Param(name="block_sizes", drawn="every field drawn, or the defaults", exercised=cov.tiled),
            cov.Param(name="debug", why=cov.DEBUG),
        ),
    ),
    cov.Api(
        # The public function returns no residuals; its module's _flash_attention does.
        name="flash_attention._flash_attention",
        locate=lambda: upstream._flash_attention,
        params=(
            *(
                cov.Param(name=name, drawn="as flash_attention", exercised=cov.always)
                for name in ("q", "k", "v", "ab", "segment_ids", "causal", "sm_scale", "block_sizes")
            ),
            cov.Param(name="save_residuals", drawn="True (logsumexp from l and m), False", exercised=cov.residuals),
            cov.Param(name="debug", why=cov.DEBUG),
        ),
    ),
    cov.Api(
        name="flash_attention.BlockSizes",
        locate=lambda: upstream.BlockSizes,
        params=tuple(
            cov.Param(name=name, drawn="lane-aligned tiles dividing their axis", exercised=cov.block(name))
            for name in FORWARD_BLOCKS + BACKWARD_BLOCKS
        ),
    ),
)
# Tiling classes of the forward pass (harness.core.features): a single tile per axis; several query
# tiles; several major key blocks per sequence; several inner key steps per major block.
TILINGS = ("one_tile", "several_q_tiles", "several_major", "several_minor")
# A query row visits more than one key tile under either key tiling: a bug of the key loop (the online
# softmax's rescaling) needs one or the other, and is named by the family (Capabilities.tiling_families).
TILING_FAMILIES = (("several_key_tiles", ("several_major", "several_minor")),)
# Every restriction the adapter applies, with its source (harness.core.contract.Restriction).
_F = "jax/experimental/pallas/ops/tpu/flash_attention.py"
_LANE = dict(upstream=_F, check="MIN_BLOCK_SIZE = 128")
_DIVIDES = dict(upstream=_F, check='f"{dim_name}={dim} should be divisible by {block_name}={block}"')
RESTRICTIONS = (
    Restriction(on="head_dims", rule="above 128 a multiple of 128", upstream=_F, check="if larger"),
    Restriction(on="mask_components", rule="causal, segment_ids and ab: its parameters", probe="API"),
    Restriction(on="violations", rule="q_len and kv_len multiples of the 128-row tiles", **_LANE),
    Restriction(on="violations", rule="head_dim above 128 a multiple of 128", upstream=_F, check="if larger"),
    Restriction(on="violations", rule="blocks name every BlockSizes field", probe="API"),
    Restriction(on="violations", rule="each tile divides its axis (or its major tile)", **_DIVIDES),
    Restriction(on="violations", rule="block_k a multiple of 128", upstream=_F, check='f"{block_k=} should be a'),
    Restriction(
        on="violations",
        rule="block_b at most the batch (it need not divide it)",
        upstream=_F,
        check='f"{block_name}={block} should be smaller or equal to {dim_name}={dim}"',
    ),
)


class PallasFlash(TpuKernel):
    title = "Pallas TPU flash attention"
    about = About(
        summary="the Pallas TPU flash-attention kernel, forward and backward",
        source="jax/experimental/pallas/ops/tpu/flash_attention.py: flash_attention",
        cases=9,  # 8 smoke with the extreme regimes; 1.6-3.0 CPU s a case (benchmarks/results/matrix_budget.json)
        blocks="all 11 BlockSizes fields",
        notes='rows with no visible key: "convex" under causal',
        restrictions=RESTRICTIONS,
    )
    capabilities = Capabilities(
        dtypes=DTYPES,
        # head_dim below 128 is sliced from a lane tile; above 128 it must be a
        # multiple of 128 (the kernel raises NotImplementedError otherwise).
        head_dims=(64, 32, 128, 80, 256),
        seq_lens=(128, 256, 384, 512),
        mask_components=frozenset({"causal_top_left", "segments", "bias"}),
        tilings=TILINGS,
        tiling_families=TILING_FAMILIES,
    )
    conventions = Conventions(
        bias="(QK^T + ab) * sm_scale: the adapter passes ab = bias / scale, in float32",
        causal="top-left (query i sees keys j <= i)",
        gqa="none: the adapter repeats k/v heads; gradients sum back through the repeat",
        empty_rows="uniform",
        # one grid cell per (batch, head, q tile), its key loop in a fixed order; but the backward's
        # di = sum(o * do) is XLA's, whose CPU reduction depended on the batch size before jax 0.11.0 (the
        # exactness probe measures the installed release: harness.running.exactness)
        reproducible=True,
        batch_invariant="dq and dk by an ulp: di is reduced by XLA (docs/findings/pallas_flash_dq_batch_dependent.md)",
        # dq, dk and dbias (= ds) are computed from ds = p * (dp - di): each follows di's reduction.
        batch_varies=("dq", "dk", "dbias"),
        notes=(
            "masked logits get a finite mask value (-0.7 * float32 max), so a row with no visible key "
            "averages every key the kernel visits: all keys, or under causal only the key tiles up to "
            "the diagonal, which depends on block sizes"
        ),
    )
    api = API

    def __init__(self, fn: Callable[..., Any] | None = None, name: str = "pallas_flash") -> None:
        super().__init__(fn, name, upstream=upstream.flash_attention)
        # The residual-saving function beside fn in its module, when there is one.
        # (the public function is jitted: its module is that of the function it wraps).
        residuals = getattr(inspect.unwrap(self.fn), "__globals__", {}).get("_flash_attention")
        # Jitted as the public function jits its own call of it (save_residuals, causal, sm_scale,
        # block_sizes and debug static): called eagerly, every call traced and lowered the kernel anew
        # (0.2-0.3 CPU s a case under the HLO interpreter, paid again by each rerun).
        self.with_residuals = None if residuals is None else jax.jit(residuals, static_argnums=(5, 6, 7, 8, 9))
        self.capabilities = dataclasses.replace(self.capabilities, residuals=self.with_residuals is not None)

    def empty_rows(self, case: Case) -> EmptyRows:
        return "convex" if case.mask.causal else "uniform"

    def empty_row_fill(self, case: Case) -> str | None:
        # The backward recomputes p = exp(s - l) from the masked logits and sends ds to q and k unmasked
        # (measured: a uniform row's whole softmax gradient).
        return "added"

    def tiling(self, case: Case) -> frozenset[str]:
        b = self._blocks(case)
        out = set()
        if b["block_q"] < case.q_len:
            out.add("several_q_tiles")
        if b["block_k_major"] < case.kv_len:
            out.add("several_major")
        if b["block_k"] < b["block_k_major"]:
            out.add("several_minor")
        return frozenset(out or {"one_tile"})

    def without_tiling(self, case: Case, tiling: str) -> Case | None:
        """One forward tile edited away, the data unchanged: query tiles to one; several major key blocks to
        one major block of minor blocks, and several minor blocks to major blocks of one minor block (several key
        tiles either way: a member of the family swapped for the other); several key tiles to one key tile."""
        b = self._blocks(case)
        if tiling == "several_minor":
            several_major = b["block_k_major"] < case.kv_len
            edit = {"block_k": b["block_k_major"]} if several_major else {"block_k_major": b["block_k"]}
        else:
            edit = {
                "several_q_tiles": {"block_q": case.q_len},
                "several_major": {"block_k_major": case.kv_len},
                "several_key_tiles": {"block_k_major": case.kv_len, "block_k": case.kv_len},
            }.get(tiling)
        return None if edit is None else case.replace(blocks=b | edit)

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return _flash_blocks(case)

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        for name, length in (("q_len", case.q_len), ("kv_len", case.kv_len)):
            if length % LANES:
                out.append(f"{name}={length} must be a multiple of {LANES}")
        if case.head_dim > LANES and case.head_dim % LANES:
            out.append(f"head_dim={case.head_dim} above {LANES} must be a multiple of {LANES}")
        blocks = case.block_dict
        if blocks:
            names = block_names(blocks, need=FORWARD_BLOCKS + BACKWARD_BLOCKS)
            if names:
                out.append(names)
            else:
                for name, length in (
                    ("block_q", case.q_len),
                    ("block_k_major", case.kv_len),
                    ("block_k", blocks["block_k_major"]),
                ):
                    if length % blocks[name]:
                        out.append(f"{name}={blocks[name]} must divide {length}")
                if blocks["block_k"] % LANES:
                    out.append(f"block_k={blocks['block_k']} must be a multiple of {LANES}")
                if blocks["block_b"] > case.batch:
                    out.append(f"block_b={blocks['block_b']} must be at most batch={case.batch}")
        return out

    def _blocks(self, case: Case) -> dict[str, int]:
        """The case's block sizes by name: its own, else the kernel's defaults for its shape."""
        return case.block_dict or dataclasses.asdict(self._block_sizes(case))

    def _block_sizes(self, case: Case) -> upstream.BlockSizes:
        if not case.blocks:
            return upstream.BlockSizes.get_default(case.batch, case.q_heads, case.q_len, case.kv_len, case.head_dim)
        return upstream.BlockSizes(**case.block_dict)

    def jax_fn(self, case: Case, *, residuals: bool = False) -> Callable[..., Any]:
        """f(q, k, v[, bias]) in the SDPA convention; run() and the compile checks both call it.

        residuals: f returns the logsumexp [B, Hq, Lq] from save_residuals' l and m instead."""
        group = case.q_heads // case.kv_heads
        scale = case.sm_scale
        segs = case.mask.segments
        q_ids, kv_ids = (None, None) if segs is None else (segs.ids("q"), segs.ids("kv"))
        block_sizes = self._block_sizes(case)
        causal = case.mask.causal == "top_left"

        def f(q, k, v, *bias):
            # Built while tracing, so the ids are constants of whichever device compiles f.
            segment_ids = None if q_ids is None else upstream.SegmentIds(q=jnp.asarray(q_ids), kv=jnp.asarray(kv_ids))
            # The kernel adds ab before scaling; dividing by the scale gives the SDPA
            # convention. float32 keeps the division from rounding the bias.
            ab = bias[0].astype(jnp.float32) / scale if bias else None
            k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
            if residuals:
                # _flash_attention(q, k, v, ab, segment_ids, save_residuals, causal, sm_scale, block_sizes, debug)
                _, total, peak = self.with_residuals(q, k, v, ab, segment_ids, True, causal, scale, block_sizes, False)
                return peak + jnp.log(total)
            return self.fn(q, k, v, ab, segment_ids, causal=causal, sm_scale=scale, block_sizes=block_sizes)

        return f

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        with_lse = case.residuals and self.with_residuals is not None
        lse = (lambda: self.jax_fn(case, residuals=True)) if with_lse else None
        return self.outputs(self.jax_fn(case), inputs, grads=grads, lse=lse)


def dropin(fn: Callable[..., Any], *, name: str) -> PallasFlash:
    """Test `fn`, a function with the upstream flash_attention signature, as this kernel."""
    return PallasFlash(fn, name=name)


register(PallasFlash())
