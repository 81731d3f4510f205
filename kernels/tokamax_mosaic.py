"""tokamax's Mosaic TPU attention: tokamax.dot_product_attention(implementation="mosaic") and the op
behind it (tokamax/_src/ops/attention/pallas_mosaic_tpu.py), forward and backward.

Native on a TPU; elsewhere the same kernel code (tokamax's own copy of splash attention) under the Pallas
interpreters, with tokamax's device gate opened around the call and nowhere else (under the CLI, in the
worker process that calls the kernel). The gate, `supported_on` of the op and of its VJP op, asks for a TPU
v5 or later and raises NotImplementedError("Not supported on cpu.") otherwise: a device check, not a
numeric restriction. The conventions say so, so every run.json records it.

The fast interpreter (HLO) runs tokamax's call as it is. The faithful one (the TPU interpret mode) meets two
gaps of jax's (docs/findings/tokamax_mosaic_faithful_interpreter.md): the op's custom_vjp asks for jax's
remat optimization, which refused forward functions with the interpreter's IO callbacks before jax 0.12.0,
and the interpreter mis-sizes the grid of a vmapped kernel (tokamax vmaps over the batch). Around a faithful
call the adapter allows the callbacks where the installed jax does not (`remat_takes_callbacks`) and calls
tokamax one batch row at a time.

What mosaic takes, read from tokamax's source (pallas_mosaic_tpu_common.py): float32 and bfloat16; no
bias, no query_seq_lengths or key_value_seq_lengths (mask q_end, k_end), no local_window_size (k_start,
k_end): each raises NotImplementedError; a boolean `mask` of one head, unbatched. So every mask component
shared by all batch rows and heads goes in as one [q_len, kv_len] boolean mask, and is_causal natively.

Configs: with no blocks the public function runs with its heuristic config; blocks name the op's Config
(block_q, block_kv, block_kv_compute, the q/k/v layouts, use_experimental_scheduler, use_base2_exp) and
its VJP's (block_q_dkv, block_kv_dkv, block_kv_dkv_compute, dkv_use_base2_exp), passed as tokamax's Op
docstring shows (op.replace(config=...)). Flags are present (1) for True. The logsumexp residual comes
from the op's return_residuals. `dropin(fn)` tests a function with the public signature
(kernels/_tokamax.py), on its own heuristics: a drop-in takes no config.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import tokamax
from hypothesis import strategies as st
from tokamax._src.ops.attention import base
from tokamax._src.ops.attention import pallas_mosaic_tpu as mosaic
from tokamax._src.ops.attention import pallas_mosaic_tpu_vjp as mosaic_vjp
from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_kernel as splash

from harness.core import coverage as cov
from harness.core.case import REGIMES, Case
from harness.core.contract import About, Capabilities, Conventions, Outputs, Restriction, register
from harness.core.inputs import Inputs
from harness.core.masks import Mask
from harness.runtime import interpret
from kernels._pallas import TpuKernel, block_names
from kernels._tokamax import PRECISION, default_flags

IMPLEMENTATION = "mosaic"
FORWARD_BLOCKS = ("block_q", "block_kv", "block_kv_compute", "q_layout", "k_layout", "v_layout")
FORWARD_FLAGS = ("use_experimental_scheduler", "use_base2_exp")
DKV_BLOCKS = ("block_q_dkv", "block_kv_dkv", "block_kv_dkv_compute")
DKV_BASE2 = "dkv_use_base2_exp"  # the VJP Config's use_base2_exp
LAYOUTS = tuple(layout.value for layout in splash.QKVLayout)  # HEAD_DIM_MINOR, SEQ_MINOR
# The ops the public function dispatches to (api.IMPLEMENTATIONS["mosaic_tpu"]) and its VJP: the gate's two halves.
GATED = (mosaic.PallasMosaicTpuFlashAttention, mosaic_vjp.PallasMosaicTpuFlashAttentionVjp)
# Mask components that are the same in every batch row and head: one [q_len, kv_len] boolean mask.
SHARED_MASKED = ("window", "causal_offset", "chunk", "block_sparse", "causal_bottom_right")


def _multiple_of(config: type, name: str) -> int:
    """The multiple a Config tile must be, as the installed release declares it (pydantic's multiple_of:
    `conint(multiple_of=NUM_LANES)` in tokamax 0.0.12, `Annotated[int, Field(multiple_of=NUM_LANES)]` in 0.0.17)."""
    metadata = config.__pydantic_fields__[name].metadata
    return next((m.multiple_of for m in metadata if getattr(m, "multiple_of", None)), 1)


# Each Config tile's multiple, from the installed op's Config and its VJP's.
TILE_MULTIPLES = {name: _multiple_of(mosaic.Config, name) for name in FORWARD_BLOCKS[:3]} | {
    name: _multiple_of(mosaic_vjp.Config, name) for name in DKV_BLOCKS
}

_COMMON = "tokamax/_src/ops/attention/pallas_mosaic_tpu_common.py"
# With grouped query heads and a boolean mask, tokamax 0.0.12's dkv kernel adds each head's share to the previous
# heads' through an input aliased to its output, which a TPU does not fetch again while the block index stays:
# where the pass has one key tile, dk and dv keep the last head's share alone (`sums_dkv_in_place`; 0.0.16 sums
# the heads' shares outside the kernel up to two key tiles).
ONE_KV_TILE = "docs/findings/tokamax_mosaic_gqa_mask_one_kv_tile.md"
DEFAULT_TILE = 128  # the heuristic configs' tiles (pallas_mosaic_tpu*.py: _get_heuristics_config)
_KERNEL = "tokamax/_src/ops/experimental/tpu/splash_attention/splash_attention_kernel.py"
RESTRICTIONS = (
    Restriction(
        on="dtypes",
        rule="float32 and bfloat16",
        upstream=_COMMON,
        check='raise NotImplementedError("Only bfloat16 and float32 inputs are supported.")',
    ),
    Restriction(
        on="head_dims",
        rule="32, 64, 128, 256",
        choice="the values drawn (each measured to run); tokamax's mosaic source checks no head_dim",
    ),
    Restriction(
        on="mask_components",
        rule="no bias",
        upstream=_COMMON,
        check='raise NotImplementedError("Bias is not supported.")',
    ),
    Restriction(
        on="mask_components",
        rule="no lengths (query_seq_lengths, key_value_seq_lengths: mask q_end, k_end)",
        upstream=_COMMON,
        check='raise NotImplementedError("mask.k_end is not supported.")',
    ),
    Restriction(
        on="mask_components",
        rule="no segments or per-head masks: the boolean mask is one head, unbatched",
        upstream=_COMMON,
        check='"Only num_mask_heads=1 is supported with a boolean mask."',
    ),
    Restriction(
        on="violations",
        rule="q_len and kv_len multiples of the 128-row tiles, each tile dividing its axis",
        upstream="tokamax/_src/ops/experimental/tpu/splash_attention/splash_attention_mask_info.py",
        check="should divide {q_seq_len=}",
    ),
    Restriction(
        on="violations",
        rule="blocks name every Config field of both ops (flags optional), each tile a multiple its Config declares",
        probe="TILE_MULTIPLES",
    ),
    Restriction(
        on="violations", rule="block_kv a multiple of block_kv_compute", upstream=_KERNEL, check="bkv % bkv_compute"
    ),
    Restriction(
        on="violations",
        rule="precision_highest and the Config flags present as 1, or absent",
        choice="the adapter's encoding of booleans as block sizes",
    ),
    Restriction(
        on="violations",
        rule="q_layout, k_layout, v_layout a QKVLayout value",
        choice="the adapter's encoding of splash.QKVLayout as its value",
    ),
    Restriction(
        on="violations",
        rule=(
            "where the installed tokamax sums dk and dv in place (0.0.12), grouped query heads with a boolean mask"
            " only where the dkv pass visits two key tiles or more"
        ),
        probe="sums_dkv_in_place",
    ),
)


def _config_param(name: str, drawn: str) -> cov.Param:
    return cov.Param(name=name, drawn=drawn, exercised=cov.block(name))


_LANE_TILES = "lane-aligned tiles dividing their axis"
_LAYOUT = "HEAD_DIM_MINOR, SEQ_MINOR"
_CALL_REASONS = {
    "bias": "mosaic raises NotImplementedError: Bias is not supported (check_inputs_support)",
    "dropout_mask": "mosaic raises NotImplementedError: dropout is not supported",
    "dropout_rate": "mosaic raises NotImplementedError: Dropout is not supported",
    "paging_info": "mosaic raises NotImplementedError: Paged attention not supported",
    "logits_dtype": "mosaic raises NotImplementedError unless float32 (the default for its inputs)",
    "q_sharding": cov.SHARDING,
    "k_sharding": cov.SHARDING,
    "q_indices": "the mosaic op never reads it (pallas_mosaic_tpu.py _fwd)",
    "k_indices": "the mosaic op never reads it (pallas_mosaic_tpu.py _fwd)",
    "normalize_output": "its VJP raises NotImplementedError for False; True is the default",
}
API = (
    cov.Api(
        name="tokamax.dot_product_attention",
        locate=lambda: tokamax.dot_product_attention,
        params=(
            *cov.dot_product_arrays()[:3],
            cov.Param(name="bias", why=_CALL_REASONS["bias"]),
            cov.Param(
                name="mask",
                drawn="boolean [T, S]: windows, chunks, block-sparse patterns, bottom-right causal",
                exercised=lambda case: _shared_mask(case) is not None,
            ),
            cov.scale_param("scale"),
            cov.Param(name="is_causal", drawn="True, False", exercised=cov.causal_top_left),
            cov.Param(name="query_seq_lengths", why="mosaic raises NotImplementedError: mask.q_end is not supported"),
            cov.Param(
                name="key_value_seq_lengths", why="mosaic raises NotImplementedError: mask.k_end is not supported"
            ),
            cov.Param(
                name="local_window_size",
                why="mosaic raises NotImplementedError (mask.k_start): windows go in through `mask`",
            ),
            cov.soft_cap_param("logits_soft_cap"),
            cov.Param(
                name="precision", drawn="None, HIGHEST (block flag precision_highest)", exercised=cov.block(PRECISION)
            ),
            cov.Param(name="implementation", drawn='"mosaic"', exercised=cov.always, why="this kernel"),
            cov.Param(name="q_sharding", why=cov.SHARDING),
        ),
    ),
    cov.Api(
        name="pallas_mosaic_tpu.PallasMosaicTpuFlashAttention",
        locate=lambda: mosaic.PallasMosaicTpuFlashAttention(),
        params=(
            *cov.arrays("[B, T, N, H]", "[B, S, K, H]", "[B, S, K, H]"),
            cov.Param(
                name="mask", drawn="Mask(boolean [T, S], is_causal=...)", exercised=lambda case: bool(case.blocks)
            ),
            cov.Param(name="is_causal", why="the op takes causality in `mask` as the public function passes it"),
            cov.Param(name="logits_scale", drawn=cov.SCALES_DRAWN, exercised=lambda case: bool(case.blocks)),
            cov.Param(name="logits_soft_cap", drawn="as the public function", exercised=cov.soft_cap),
            cov.Param(name="precision", drawn="as the public function", exercised=cov.block(PRECISION)),
            cov.Param(name="return_residuals", drawn="True (the logsumexp), False", exercised=cov.residuals),
            *(cov.Param(name=name, why=why) for name, why in _CALL_REASONS.items()),
        ),
    ),
    cov.Api(
        name="pallas_mosaic_tpu.Config",
        locate=lambda: mosaic.Config,
        params=(
            *(_config_param(name, _LANE_TILES) for name in FORWARD_BLOCKS[:3]),
            *(_config_param(name, _LAYOUT) for name in FORWARD_BLOCKS[3:]),
            *(_config_param(name, "True (present), False") for name in FORWARD_FLAGS),
        ),
    ),
    cov.Api(
        name="pallas_mosaic_tpu_vjp.Config",
        locate=lambda: mosaic_vjp.Config,
        params=(
            *(_config_param(name, _LANE_TILES) for name in DKV_BLOCKS),
            cov.Param(name="use_base2_exp", drawn="True (dkv_use_base2_exp), False", exercised=cov.block(DKV_BASE2)),
        ),
    ),
)


@contextlib.contextmanager
def gate_opened() -> Iterator[None]:
    """tokamax's device gate (`supported_on`, a TPU v5 or later) answers True for both ops inside the block."""
    saved = [(cls, cls.__dict__.get("supported_on")) for cls in GATED]
    for cls in GATED:
        cls.supported_on = _any_device
    try:
        yield
    finally:
        for cls, original in saved:
            if original is None:
                del cls.supported_on
            else:
                cls.supported_on = original


@contextlib.contextmanager
def remat_takes_callbacks() -> Iterator[None]:
    """jax's remat optimization of a custom_vjp accepts the TPU interpret mode's IO callbacks inside the block.

    tokamax's Op defines its custom_vjp with optimize_remat=True (tokamax/_src/ops/op.py), whose forward
    refuses effects outside effects.custom_derivatives_allowed_effects (jax/_src/custom_derivatives.py:
    optimize_remat_of_custom_vjp_fwd): the faithful interpreter's callbacks are IOEffect and OrderedIOEffect,
    on that list from jax 0.12.0 on (jax/_src/callback.py), where the block adds nothing. Outside
    jax.checkpoint the remat_opt primitive runs the forward once, as without the optimization."""
    from jax._src import callback, effects

    allowed = effects.custom_derivatives_allowed_effects
    added = [t for t in (callback.IOEffect, callback.OrderedIOEffect) if t not in allowed._effect_types]
    for t in added:
        allowed.add_type(t)
    try:
        yield
    finally:
        allowed._effect_types.difference_update(added)


def _any_device(self: Any, device: jax.Device) -> bool:
    return True


@functools.cache
def sums_dkv_in_place(kv_tiles: int = 1) -> bool:
    """Whether the installed tokamax sums the dk and dv shares of a group's query heads in place, through inputs
    aliased to the dkv kernel's outputs, on a boolean mask's dkv pass of `kv_tiles` key tiles (one: ONE_KV_TILE).
    Read from the pallas_calls its VJP traces to; nothing runs."""
    default_flags()
    length = kv_tiles * DEFAULT_TILE
    rows = np.arange(length)
    band = jnp.asarray(np.abs(rows[:, None] - rows[None]) <= 3)
    q = jax.ShapeDtypeStruct((1, length, 2, 128), jnp.float32)
    kv = jax.ShapeDtypeStruct((1, length, 1, 128), jnp.float32)

    def gradients(q, k, v, dout):
        def attention(q, k, v):
            return tokamax.dot_product_attention(q, k, v, None, band, implementation=IMPLEMENTATION)

        return jax.vjp(attention, q, k, v)[1](dout)

    with gate_opened():
        traced = jax.make_jaxpr(gradients)(q, kv, kv, q)
    # The dkv kernel's outputs are (dq, dk, dv): dk and dv aliased to inputs is the in-place sum.
    aliased = ({out for _, out in call.params["input_output_aliases"]} for call in _pallas_calls(traced.jaxpr))
    return any({1, 2} <= outputs for outputs in aliased)


def _pallas_calls(jaxpr: Any) -> Iterator[Any]:
    from jax._src import core

    yield from (eqn for eqn in jaxpr.eqns if eqn.primitive.name == "pallas_call")
    for sub in core.subjaxprs(jaxpr):
        yield from _pallas_calls(sub)


def _tiles(length: int, multiple: int) -> list[int]:
    """The tiles a Config may name for an axis of `length`: multiples of `multiple` dividing it."""
    return [t for t in range(multiple, length + 1, multiple) if length % t == 0]


@st.composite
def _configs(draw: Any, case: Case) -> dict[str, int]:
    blocks: dict[str, int] = {}

    def tile(name: str, length: int) -> int:
        blocks[name] = draw(st.sampled_from(_tiles(length, TILE_MULTIPLES[name])))
        return blocks[name]

    # block_kv a multiple of block_kv_compute (Config.__post_init__), each a multiple its Config declares.
    tile("block_q", case.q_len)
    tile("block_kv_compute", tile("block_kv", case.kv_len))
    blocks |= {name: draw(st.sampled_from(LAYOUTS)) for name in FORWARD_BLOCKS[3:]}
    tile("block_q_dkv", case.q_len)
    tile("block_kv_dkv_compute", tile("block_kv_dkv", case.kv_len))
    for flag in (*FORWARD_FLAGS, DKV_BASE2):
        if draw(st.booleans()):
            blocks[flag] = 1
    return blocks


@st.composite
def _blocks(draw: Any, case: Case, configs: bool) -> dict[str, int]:
    blocks = draw(_configs(case)) if configs and draw(st.booleans()) else {}
    blocks |= {PRECISION: 1} if draw(st.booleans()) else {}
    # No configs reach two key tiles (ONE_KV_TILE): the case is left undrawn, never drawn outside the contract.
    return draw(st.nothing()) if _one_kv_tile(case.replace(blocks=blocks)) else blocks


def _one_kv_tile(case: Case) -> bool:
    """Grouped query heads with a boolean mask, where the dkv pass visits at most one key tile and the installed
    tokamax sums dk and dv in place there (ONE_KV_TILE)."""
    if case.q_heads == case.kv_heads or _shared_mask(case) is None or not sums_dkv_in_place():
        return False
    tile = case.block_dict.get("block_kv_dkv", DEFAULT_TILE)
    if case.kv_len % tile:
        return False  # outside the contract for its tiles already
    mask = case.mask
    visible = Mask(causal=mask.causal, window=mask.window, chunk=mask.chunk, block_sparse=mask.block_sparse)
    seen = visible.visible_2d(case.q_len, case.kv_len).reshape(case.q_len, -1, tile).any(axis=(0, 2))
    return int(seen.sum()) <= 1


def _shared_mask(case: Case) -> np.ndarray | None:
    """The boolean [q_len, kv_len] mask of every component but top-left causal (is_causal), or None."""
    mask = case.mask
    rest = Mask(
        causal=mask.causal if mask.causal == "bottom_right" else None,
        window=mask.window,
        chunk=mask.chunk,
        block_sparse=mask.block_sparse,
    )
    return rest.visible_2d(case.q_len, case.kv_len) if rest.components else None


class TokamaxMosaic(TpuKernel):
    title = 'tokamax.dot_product_attention(implementation="mosaic")'
    about = About(
        summary="tokamax's Mosaic TPU flash attention (its splash kernels), forward and backward",
        source="tokamax/_src/ops/attention/pallas_mosaic_tpu.py: PallasMosaicTpuFlashAttention",
        # 10 smoke (on the faithful interpreter), 1 drawn. `run --examples 20 --seed 1 --profile ci`: 353 CPU s from
        # cold caches (17.7 a case, references and probes in; 870 s wall at load 12 on 2 cores), 203 CPU s on a
        # rerun (10.1 a case; 267 s wall); finding the smoke set: 49 CPU s. Its matrix cases (ci, smoke first):
        # 1.3-10.7 CPU s a case, 38 in all (benchmarks/results/matrix_budget.json).
        cases=11,
        blocks="none (heuristics), or every Config field of the op and its VJP; precision_highest",
        notes="off a TPU under both Pallas interpreters, its device gate (supported_on) opened around the call",
        restrictions=RESTRICTIONS,
    )
    capabilities = Capabilities(
        dtypes=("float32", "bfloat16"),
        head_dims=(128, 64, 32, 256),
        seq_lens=(128, 256, 384),
        mask_components=frozenset({"causal_top_left", *SHARED_MASKED}),
        dbias=False,
        soft_cap=True,
        residuals=True,
        # Not the regimes that move logits 2**17 from zero: with use_base2_exp (the heuristic config's) the backward
        # recomputes p as exp2 of two float32 products rounded near 1.9e5
        # (docs/findings/tokamax_mosaic_base2_backward_precision.md).
        regimes=tuple(r for r in REGIMES if r not in ("dominant", "offset")),
    )
    conventions = Conventions(
        bias="none: mosaic raises NotImplementedError",
        causal="top-left (is_causal; query i sees keys j <= i); bottom-right through the boolean mask",
        gqa="native: key/value heads dividing the query heads (one key/value head: splash's MQA kernel)",
        # A query tile that visits no key tile divides 0 by 0 (NaN), an empty row in one that visits some
        # averages them: measured, as splash's (docs/divergences/pallas_splash_rows_with_no_visible_key.md).
        empty_rows="nan_or_convex",
        reproducible=True,
        batch_invariant=True,
        notes=(
            "layout [batch, seq, heads, head_dim] (the adapter transposes). Off a TPU tokamax's device gate "
            "(supported_on of the op and its VJP op: a TPU v5 or later) is opened around the kernel call, in "
            "the process that calls it: a device check, not a numeric restriction. Under the faithful "
            "interpreter the call allows the interpreter's IO callbacks in custom_vjp's remat optimization and "
            "takes one batch row at a time (docs/findings/tokamax_mosaic_faithful_interpreter.md). Masked "
            "logits get float32's min: a row with no visible key is NaN where its query tile visits no key tile, "
            "else the average of the keys of the tiles it visits"
        ),
    )
    api = API

    def __init__(self, fn: Callable[..., Any] | None = None, name: str = "tokamax_mosaic") -> None:
        super().__init__(fn, name, upstream=tokamax.dot_product_attention)
        self.upstream = fn is None
        # A drop-in has the public signature: no config, no residuals.
        self.capabilities = dataclasses.replace(self.capabilities, residuals=self.upstream)

    def _context(self) -> AbstractContextManager[Any]:
        stack = contextlib.ExitStack()
        stack.enter_context(super()._context())
        if not self.native():
            stack.enter_context(gate_opened())
            if self._row_by_row():
                stack.enter_context(remat_takes_callbacks())
        return stack

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return _blocks(case, self.upstream)

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        for name, length in (("q_len", case.q_len), ("kv_len", case.kv_len)):
            if length % 128:
                out.append(f"{name}={length} must be a multiple of 128 (the heuristic config's tiles)")
        if _one_kv_tile(case):
            out.append(
                f"q_heads={case.q_heads} > kv_heads={case.kv_heads} with a boolean mask whose dkv pass visits one key "
                f"tile: dk and dv keep the last query head's share ({ONE_KV_TILE})"
            )
        blocks = {k: v for k, v in case.block_dict.items() if k != PRECISION}
        if case.block_dict.get(PRECISION, 1) != 1:
            out.append(f"{PRECISION}={case.block_dict[PRECISION]} must be 1 (present) or absent")
        if not blocks:
            return out
        if not self.upstream:
            return [*out, f"a drop-in takes no config; blocks may hold only {PRECISION}=1, got {case.block_dict}"]
        names = block_names(blocks, need=FORWARD_BLOCKS + DKV_BLOCKS, may=(*FORWARD_FLAGS, DKV_BASE2))
        if names:
            return [*out, names]
        for flag in (*FORWARD_FLAGS, DKV_BASE2):
            if blocks.get(flag, 1) != 1:
                out.append(f"{flag}={blocks[flag]} must be 1 (present) or absent")
        for name in FORWARD_BLOCKS[3:]:
            if blocks[name] not in LAYOUTS:
                out.append(f"{name}={blocks[name]} is not a QKVLayout value {LAYOUTS}")
        for name, length in (
            ("block_q", case.q_len),
            ("block_kv", case.kv_len),
            ("block_kv_compute", blocks["block_kv"]),
            ("block_q_dkv", case.q_len),
            ("block_kv_dkv", case.kv_len),
            ("block_kv_dkv_compute", blocks["block_kv_dkv"]),
        ):
            if blocks[name] not in _tiles(length, TILE_MULTIPLES[name]):
                out.append(f"{name}={blocks[name]} must be a multiple of {TILE_MULTIPLES[name]} dividing {length}")
        return out

    def op(self, case: Case) -> mosaic.PallasMosaicTpuFlashAttention:
        """The op the public function dispatches to, with the case's configs (the heuristics without blocks)."""
        blocks = case.block_dict
        if not set(blocks) - {PRECISION}:
            return mosaic.PallasMosaicTpuFlashAttention()
        config = mosaic.Config(
            **{name: blocks[name] for name in FORWARD_BLOCKS[:3]},
            **{name: splash.QKVLayout(blocks[name]) for name in FORWARD_BLOCKS[3:]},
            **{name: name in blocks for name in FORWARD_FLAGS},
        )
        dkv = mosaic_vjp.Config(**{name: blocks[name] for name in DKV_BLOCKS}, use_base2_exp=DKV_BASE2 in blocks)
        return mosaic.PallasMosaicTpuFlashAttention(
            config=config, vjp=mosaic_vjp.PallasMosaicTpuFlashAttentionVjp(config=dkv)
        )

    def jax_fn(self, case: Case, *, residuals: bool = False) -> Callable[..., Any]:
        """f(q, k, v) in the SDPA convention; with `residuals` the op's logsumexp [B, Hq, Lq] instead."""
        shared = _shared_mask(case)
        causal = case.mask.causal == "top_left"
        precision = jax.lax.Precision.HIGHEST if PRECISION in case.block_dict else None
        configured = bool(set(case.block_dict) - {PRECISION})
        op = self.op(case)

        def call(q, k, v):
            mask = None if shared is None else jnp.asarray(shared)
            if not (configured or residuals):
                return self.fn(
                    q,
                    k,
                    v,
                    None,
                    mask,
                    scale=case.sm_scale,
                    is_causal=causal,
                    logits_soft_cap=case.soft_cap,
                    precision=precision,
                    implementation=IMPLEMENTATION,
                )
            # As api.dot_product_attention calls the op, with the config it cannot pass.
            got = op(
                q,
                k,
                v,
                mask=base.Mask(mask, is_causal=causal),
                logits_scale=case.sm_scale,
                precision=precision,
                logits_soft_cap=case.soft_cap,
                return_residuals=residuals,
            )
            return got[1][1] if residuals else got

        def f(q, k, v):
            q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))
            if self._row_by_row():
                # tokamax vmaps its kernel over the batch, and the TPU interpret mode sizes a vmapped grid
                # without its batch dimension (docs/findings/tokamax_mosaic_faithful_interpreter.md); a vmap
                # of one row adds none (pallas_call's batching rule squeezes it).
                got = jnp.concatenate([call(q[b : b + 1], k[b : b + 1], v[b : b + 1]) for b in range(q.shape[0])])
            else:
                got = call(q, k, v)
            return got if residuals else jnp.swapaxes(got, 1, 2)

        return f

    def _row_by_row(self) -> bool:
        """Whether the kernel is called one batch row at a time: under the faithful interpreter."""
        return not self.native() and interpret.interpret_options().interpreter == "faithful"

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        default_flags()
        with_lse = case.residuals and self.upstream
        lse = (lambda: self.jax_fn(case, residuals=True)) if with_lse else None
        return self.outputs(self.jax_fn(case), inputs, grads=grads, lse=lse)


def dropin(fn: Callable[..., Any], *, name: str) -> TokamaxMosaic:
    """Test `fn`, a function with the tokamax.dot_product_attention signature, as this kernel."""
    return TokamaxMosaic(fn, name=name)


register(TokamaxMosaic())
