"""The Pallas GPU flash-attention kernel (jax.experimental.pallas.ops.gpu.attention.mha).

Native on a GPU (Triton), otherwise the same kernel code with `interpret=True`, the
generic Pallas interpreter on CPU. `dropin(fn)` wraps any function with the upstream
signature, so a fork is tested exactly like the upstream kernel:
    mha(q, k, v, segment_ids, sm_scale=1.0, causal=False, block_sizes=..., interpret=False)
with q, k, v in [batch, seq_len, heads, head_dim] and segment_ids [batch, seq_len].
On residual cases a second forward call passes return_residuals=True (where the installed mha
takes it, read from its signature): the kernel's lse is in base 2 (m + log2(l) of logits
scaled by log2(e)), converted to the natural log before it is checked.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from hypothesis import assume
from hypothesis import strategies as st
from jax.experimental.pallas.ops.gpu import attention as upstream

from harness.core import coverage as cov
from harness.core.case import DTYPES, REGIMES, Case
from harness.core.contract import (
    About,
    Capabilities,
    Conventions,
    EmptyRows,
    Outputs,
    Refusal,
    Restriction,
    register,
)
from harness.core.inputs import Inputs
from harness.core.masks import CAUSAL_Q_LE_KV, SEGMENTS_SHARED
from kernels._pallas import GpuKernel, block_names

# Tile sizes: Triton's tl.dot needs every matmul dimension >= 16; the kernel slices
# whole tiles, so each must divide its sequence ("q_seq_len=... must be a multiple of
# block_q=..."; the backward pass has no check and reads past the end otherwise).
TILES = (16, 32, 64, 128)
# Each BlockSizes field and the sequence it cuts.
ALL_TILES = {
    "block_q": "q_len",
    "block_k": "kv_len",
    "block_q_dkv": "q_len",
    "block_kv_dkv": "kv_len",
    "block_q_dq": "q_len",
    "block_kv_dq": "kv_len",
}


def tiles_of(module: Any) -> dict[str, str]:
    """Each tile mha takes and the sequence it cuts: BlockSizes' fields where `module` (the installed
    attention module) has BlockSizes (jax 0.5.1 on), else mha's own block_q and block_k, which its
    backward pass takes too (jax 0.4.30 to 0.5.0)."""
    return dict(ALL_TILES) if hasattr(module, "BlockSizes") else {"block_q": "q_len", "block_k": "kv_len"}


BLOCK_SIZES = hasattr(upstream, "BlockSizes")
BLOCKS = tiles_of(upstream)
# Up to jax 0.5.0 mha's backward passes reuse its two tiles: the dkv pass walks key tiles of block_k
# over query tiles of block_q, the dq pass query tiles of block_q over key tiles of block_k
# (block_q1 = block_q2 = block_q, block_k1 = block_k2 = block_k in _mha_backward). BlockSizes
# (0.5.1 on) names each: the same program is these four set from the two.
FROM_TWO_TILES = {
    "block_q_dkv": "block_q",
    "block_kv_dkv": "block_k",
    "block_q_dq": "block_q",
    "block_kv_dq": "block_k",
}


def as_installed(blocks: dict[str, int]) -> dict[str, int]:
    """A case's blocks in the installed mha's tile names (BLOCKS), so that a failure file written under
    the other API replays the same program here: 0.5.0's two tiles as BlockSizes' six (FROM_TWO_TILES),
    or six whose backward tiles repeat the forward ones as the two. Any other blocks are left as they
    are (violations names what is missing)."""
    tiles = {k for k in blocks if k in ALL_TILES}
    if BLOCK_SIZES and tiles == {"block_q", "block_k"}:
        return {**blocks, **{name: blocks[two] for name, two in FROM_TWO_TILES.items()}}
    if not BLOCK_SIZES and tiles == set(ALL_TILES) and all(blocks[n] == blocks[t] for n, t in FROM_TWO_TILES.items()):
        return {k: v for k, v in blocks.items() if k not in FROM_TWO_TILES}
    return blocks


def refuses_partial_tiles(mha: Callable[..., Any]) -> bool:
    """Whether `mha` (the installed one) raises for a tile that does not divide its sequence, probed by
    tracing one small forward call (jax.eval_shape, nothing runs). jax 0.6.2 on raise ("q_seq_len=48
    must be a multiple of block_q=32"); the releases before read past the sequence's end instead, a
    wrong answer (docs/history.md MHA-3), so there such a tile is inside the contract. A probe that
    fails any other way keeps the tiles dividing."""
    x = jax.ShapeDtypeStruct((1, 48, 1, 16), jnp.float32)
    tiles = {"block_q": 32, "block_k": 32}
    kw = {"block_sizes": upstream.BlockSizes(**tiles)} if BLOCK_SIZES else tiles
    try:
        jax.eval_shape(lambda q, k, v: mha(q, k, v, None, interpret=True, **kw), x, x, x)
    except Exception:  # noqa: BLE001 - ValueError where refused; anything else: keep the safe contract
        return True
    return False


# Whether a tile may leave part of its sequence over, and the lengths drawn: where the installed mha
# accepts such a tile, also a length no tile of TILES but 16 and 32 divides (96, cut by 64 into a
# tile and a half), so that the partial tile is met; elsewhere the powers of two alone, where q and
# kv always share a backward tile count (see _gpu_blocks).
PARTIAL_TILES = not refuses_partial_tiles(upstream.mha)
SEQ_LENS = (64, 128, 256, 96) if PARTIAL_TILES else (64, 128, 256)
# Tiling classes (harness.core.features), declared where a partial tile is drawn: one tile per
# sequence, several whole tiles, a tile that leaves part of its sequence over.
TILINGS = ("one_tile", "several_tiles", "partial_tile") if PARTIAL_TILES else ()
TILE_FIT = "up to" if PARTIAL_TILES else "dividing"  # how a drawn tile fits its sequence, in words


# mha's other arguments that never change the mathematics, carried in blocks beside the tiles
# (each optional; absent means mha's default): the Triton launch parameters num_warps and
# num_stages (ignored by the interpreter, compiled on a GPU), and BACKWARD_XLA=1 for
# backward_pass_impl="xla" (the VJP of mha_reference instead of the Triton backward kernels).
# `grid` and `debug` are not drawn: a grid other than mha's own computes a different problem.
BACKWARD_XLA = "backward_xla"
OPTIONS = {"num_warps": (2, 4, 8), "num_stages": (1, 2, 3), BACKWARD_XLA: (1,)}
# Every restriction the adapter applies, with its source (harness.core.contract.Restriction).
_A = "jax/experimental/pallas/ops/gpu/attention.py"
_ONE_IDS = dict(upstream=_A, check="segment_ids: jnp.ndarray | None,")
_CAUSAL = dict(finding="docs/divergences/pallas_gpu_causal_q_longer_than_kv.md")
RESTRICTIONS = (
    Restriction(on="head_dims", rule="padded to a power of two", upstream=_A, check="pl.next_power_of_2(head_dim)"),
    Restriction(on="mask_components", rule="causal and segment_ids: its parameters", probe="API"),
    Restriction(on="restrictions:segments_shared", rule="one segment-id array for q and kv", **_ONE_IDS),
    Restriction(on="restrictions:causal_q_le_kv", rule="causal only with q_len <= kv_len", **_CAUSAL),
    Restriction(on="violations", rule="one segment-id array, q_len == kv_len", **_ONE_IDS),
    Restriction(on="violations", rule="causal only with q_len <= kv_len", **_CAUSAL),
    Restriction(
        on="violations", rule="backward_xla only in float32", finding="docs/findings/pallas_gpu_xla_backward_16bit.md"
    ),
    Restriction(on="violations", rule="num_warps, num_stages from OPTIONS", choice="launch values; ignored off a GPU"),
    Restriction(
        on="violations", rule="blocks name every tile mha takes (BlockSizes' fields, or its own two)", probe="BLOCKS"
    ),
    Restriction(on="violations", rule="tiles from TILES", choice="the tile sizes drawn, powers of two 16 to 128"),
    # Probed (PARTIAL_TILES): where the installed mha raises for a tile that leaves part of its axis over.
    Restriction(on="violations", rule="tiles dividing their axis, where mha refuses others", probe="PARTIAL_TILES"),
    # Where BlockSizes exists (the fused backward's check, jax 0.5.1 on); before it one pair of tiles serves all.
    Restriction(on="violations", rule="dq and dkv tiles: one grid", upstream=_A, check="must be divided into the same"),
)


def _tiles(length: int) -> list[int]:
    """The tiles drawn for a sequence: those dividing it, or (PARTIAL_TILES) any up to its length."""
    return [t for t in TILES if (t <= length if PARTIAL_TILES else length % t == 0)]


@st.composite
def _gpu_blocks(draw: Any, case: Case) -> dict[str, int]:
    q_tiles, k_tiles = _tiles(case.q_len), _tiles(case.kv_len)
    blocks = {"block_q": draw(st.sampled_from(q_tiles)), "block_k": draw(st.sampled_from(k_tiles))}
    if BLOCK_SIZES:
        blocks["block_q_dkv"] = draw(st.sampled_from(q_tiles))
        blocks["block_kv_dq"] = draw(st.sampled_from(k_tiles))
        # One backward grid axis walks both the dkv tiles (over kv) and the dq tiles (over q):
        # "q_seq_len and kv_seq_len must be divided into the same number of blocks" (q_seq_len //
        # block_q_dq == kv_seq_len // block_kv_dkv). Powers of two always share one; with a partial
        # tile's length some pairs share none (96 and 256), and are not drawn.
        counts = sorted({case.q_len // t for t in q_tiles} & {case.kv_len // t for t in k_tiles})
        assume(counts)
        n = draw(st.sampled_from(counts))
        blocks["block_q_dq"] = draw(st.sampled_from([t for t in q_tiles if case.q_len // t == n]))
        blocks["block_kv_dkv"] = draw(st.sampled_from([t for t in k_tiles if case.kv_len // t == n]))
    for name, values in OPTIONS.items():
        if name == BACKWARD_XLA and case.dtype != "float32":
            continue  # the xla backward raises for 16-bit inputs (see violations)
        value = draw(st.none() | st.sampled_from(values))
        if value is not None:
            blocks[name] = value
    return blocks


API = (
    cov.Api(
        name="gpu.attention.mha",
        locate=lambda: upstream.mha,
        params=(
            *cov.arrays("[B, T, N, H] in the case dtype", "[B, S, N, H] (k/v heads repeated for GQA)", "[B, S, N, H]"),
            cov.Param(
                name="segment_ids", drawn="one [B, T] array for q and kv (T == S)", exercised=cov.component("segments")
            ),
            cov.scale_param(),
            cov.Param(name="causal", drawn="True (T <= S), False", exercised=cov.causal_top_left),
            cov.Param(name="block_sizes", drawn="every field drawn", exercised=cov.tiled),
            # Before BlockSizes (jax 0.4.30 to 0.5.0) mha took its two tiles itself.
            *(
                cov.Param(name=name, drawn=f"{', '.join(map(str, TILES))} {TILE_FIT} {seq}", exercised=cov.block(name))
                for name, seq in (("block_q", "T"), ("block_k", "S"))
            ),
            cov.Param(
                name="backward_pass_impl",
                drawn='"triton", "xla" (blocks backward_xla; float32 only: the 16-bit xla backward finding)',
                exercised=cov.block(BACKWARD_XLA),
                why="counted: cases with the xla backward",
            ),
            cov.Param(
                name="num_warps", drawn="2, 4, 8 or the default", exercised=cov.block("num_warps"), why=cov.LAUNCH
            ),
            cov.Param(
                name="num_stages", drawn="1, 2, 3 or the default", exercised=cov.block("num_stages"), why=cov.LAUNCH
            ),
            cov.Param(name="grid", why="the kernel's own grid from the shapes; a custom grid is a launch choice"),
            cov.Param(
                name="interpret",
                drawn="True off a GPU, False on one",
                exercised=cov.always,
                why="set by the platform, never drawn",
            ),
            cov.Param(name="debug", why=cov.DEBUG),
            cov.Param(
                name="return_residuals", drawn="True (a forward call of its own), False", exercised=cov.residuals
            ),
        ),
    ),
    cov.Api(
        name="gpu.attention.BlockSizes",
        locate=lambda: upstream.BlockSizes,
        params=tuple(
            cov.Param(name=name, drawn=f"{', '.join(map(str, TILES))} {TILE_FIT} {seq}", exercised=cov.block(name))
            for name, seq in ALL_TILES.items()
        ),
    ),
)


def _default_blocks(fn: Callable[..., Any]) -> dict[str, int]:
    """The tiles `fn` (mha or a drop-in) uses where the case names none: BlockSizes.get_default(), else
    the defaults of its own block_q and block_k."""
    if BLOCK_SIZES:
        default = upstream.BlockSizes.get_default()
        return {name: getattr(default, name) for name in BLOCKS}
    params = inspect.signature(fn).parameters
    return {name: params[name].default for name in BLOCKS}


class PallasGpu(GpuKernel):
    title = "Pallas GPU flash attention"
    about = About(
        summary="the Pallas GPU (Triton) flash-attention kernel, under the Pallas GPU interpreter off a GPU",
        source="jax/experimental/pallas/ops/gpu/attention.py: mha",
        cases=7,  # 5 smoke; 0.5-0.7 CPU s a case (benchmarks/results/matrix_budget.json)
        blocks="block_q, block_k, the dkv and dq blocks; num_warps, num_stages, backward_xla",
        notes="empty rows never arise in its contract",
        restrictions=RESTRICTIONS,
    )
    capabilities = Capabilities(
        dtypes=DTYPES,
        # head_dim is padded to the next power of two inside the kernel (loads masked):
        # 80 exercises the padding.
        head_dims=(64, 32, 128, 80),
        seq_lens=SEQ_LENS,
        mask_components=frozenset({"causal_top_left", "segments"}),
        # One segment-id array serves q and kv (SEGMENTS_SHARED): self-attention only.
        # Causal only with q_len <= kv_len (CAUSAL_Q_LE_KV): past that the forward and dq
        # loops read key tiles beyond the last key (docs/divergences/pallas_gpu_causal_q_longer_than_kv.json).
        restrictions=frozenset({SEGMENTS_SHARED, CAUSAL_Q_LE_KV}),
        tilings=TILINGS,
        dbias=False,
        # Not the logit-shift regimes: its backward recomputes p from a float32 logsumexp residual, which
        # near 1e5 keeps ~1e-2 of precision (docs/findings/pallas_gpu_exp2_large_logits.md).
        regimes=tuple(r for r in REGIMES if r not in ("dominant", "offset")),
    )
    conventions = Conventions(
        bias="none: the kernel takes no additive bias",
        causal="top-left (query i sees keys j <= i)",
        gqa="none: the adapter repeats k/v heads; gradients sum back through the repeat",
        empty_rows="uniform",
        # one program per (batch, head, q block) (interpret=True off a GPU: a fixed order)
        reproducible=True,
        batch_invariant=True,
        notes=(
            "layout [batch, seq, heads, head_dim] (the adapter transposes); sm_scale defaults to 1.0, the "
            "adapter passes the case's scale; one segment_ids array for q and kv. Masked logits get a finite "
            "mask value, so a row with no visible key would average the keys visited; with shared segment ids "
            "and top-left causal no such row exists"
        ),
    )
    api = API

    def __init__(self, fn: Callable[..., Any] | None = None, name: str = "pallas_gpu") -> None:
        super().__init__(fn, name, upstream=upstream.mha)
        self.capabilities = dataclasses.replace(
            self.capabilities, residuals=cov.accepts(self.fn, "return_residuals", forwarded=False)
        )

    def tiling(self, case: Case) -> frozenset[str]:
        if not TILINGS:
            return frozenset()
        blocks = as_installed(case.block_dict) or _default_blocks(self.fn)
        cuts = [(min(blocks[name], getattr(case, seq)), getattr(case, seq)) for name, seq in BLOCKS.items()]
        out = {"partial_tile"} if any(n % t for t, n in cuts) else set()
        out |= {"several_tiles"} if any(t < n for t, n in cuts) else set()
        return frozenset(out or {"one_tile"})

    def empty_rows(self, case: Case) -> EmptyRows:
        # Under causal the kernel stops at the diagonal tile, so not every key is averaged.
        return "convex" if case.mask.causal else "uniform"

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return _gpu_blocks(case)

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        segs = case.mask.segments
        if segs is not None and (case.q_len != case.kv_len or segs.q != segs.kv):
            out.append("segments must be identical for q and kv (one segment_ids array), with q_len == kv_len")
        if case.mask.causal and case.q_len > case.kv_len:
            out.append(
                f"causal with q_len={case.q_len} > kv_len={case.kv_len} reads key tiles past the last key "
                "(upstream loop bound; see docs/divergences/pallas_gpu_causal_q_longer_than_kv.json)"
            )
        blocks = as_installed(case.block_dict)
        if BACKWARD_XLA in blocks and case.dtype != "float32":
            out.append(
                f"backward_xla with dtype={case.dtype}: mha's xla backward raises for 16-bit inputs "
                "(docs/findings/pallas_gpu_xla_backward_16bit.md)"
            )
        for name, values in OPTIONS.items():
            if name in blocks and blocks.pop(name) not in values:
                out.append(f"{name}={case.block_dict[name]} must be one of {values} (or absent: mha's default)")
        if not blocks:
            # The defaults, clamped to the sequence as mha() clamps them.
            default = _default_blocks(self.fn)
            blocks = {name: min(default[name], getattr(case, seq)) for name, seq in BLOCKS.items()}
        names = block_names([*blocks, *(set(case.block_dict) & set(OPTIONS))], need=BLOCKS, may=OPTIONS)
        if names:
            out.append(names)
            return out
        for name, seq in BLOCKS.items():
            length = getattr(case, seq)
            if blocks[name] not in TILES:
                out.append(f"{name}={blocks[name]} must be one of {TILES}")
            elif length % blocks[name] and not PARTIAL_TILES:
                # The installed mha's own ValueError ("must be a multiple of"): a refusal, no wrong answer.
                out.append(
                    Refusal(f"{name}={blocks[name]} must divide {seq}={length}: this mha refuses a partial tile")
                )
        if out or not BLOCK_SIZES or BACKWARD_XLA in case.block_dict:
            return out  # (the xla backward has no grid of tiles to check)
        # mha clamps every tile to its sequence before it checks the backward grid.
        q_dq, kv_dkv = (
            min(blocks[n], getattr(case, s)) for n, s in (("block_q_dq", "q_len"), ("block_kv_dkv", "kv_len"))
        )
        if case.q_len // q_dq != case.kv_len // kv_dkv:
            # mha's own ValueError ("must be divided into the same number of blocks"), raised in its backward.
            out.append(
                Refusal(
                    f"q_len/block_q_dq={case.q_len}/{blocks['block_q_dq']} must equal "
                    f"kv_len/block_kv_dkv={case.kv_len}/{blocks['block_kv_dkv']} (one backward grid axis)",
                    backward=True,
                )
            )
        return out

    def _call(self, case: Case, inputs: Inputs, *, residuals: bool) -> Callable[..., Any]:
        """f(q, k, v): the output [B, Hq, Lq, D], or with `residuals` the natural-log logsumexp [B, Hq, Lq]."""
        group = case.q_heads // case.kv_heads
        tiles = {k: v for k, v in as_installed(case.block_dict).items() if k in BLOCKS}
        if BLOCK_SIZES:
            tiling = {"block_sizes": upstream.BlockSizes(**tiles) if tiles else upstream.BlockSizes.get_default()}
        else:
            tiling = tiles  # mha's own block_q and block_k (its defaults where the case names none)
        launch = {k: v for k, v in case.block_dict.items() if k in ("num_warps", "num_stages")}
        if BACKWARD_XLA in case.block_dict:
            launch["backward_pass_impl"] = "xla"
        seg = None if inputs.q_segment_ids is None else jnp.asarray(inputs.q_segment_ids)
        interpret = not self.native()
        causal = case.mask.causal == "top_left"
        extra = {"return_residuals": True} if residuals else {}

        def f(q, k, v):
            # The kernel's layout is [batch, seq, heads, head_dim]; its sm_scale defaults to 1.0.
            k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
            q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))
            kw = {"sm_scale": case.sm_scale, "causal": causal, **tiling, "interpret": interpret}
            got = self.fn(q, k, v, seg, **kw, **launch, **extra)
            if residuals:
                # (out, lse): lse [batch, heads, q_len] in base 2.
                return got[1] / math.log2(math.e)
            return jnp.swapaxes(got, 1, 2)

        return f

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        # The logsumexp from a separate forward call: mha does not differentiate with return_residuals=True.
        with_lse = case.residuals and self.capabilities.residuals
        lse = (lambda: self._call(case, inputs, residuals=True)) if with_lse else None
        return self.outputs(self._call(case, inputs, residuals=False), inputs, grads=grads, lse=lse)


def dropin(fn: Callable[..., Any], *, name: str) -> PallasGpu:
    """Test `fn`, a function with the upstream mha signature, as this kernel."""
    return PallasGpu(fn, name=name)


register(PallasGpu())
