"""The Pallas TPU splash-attention kernel (jax.experimental.pallas.ops.tpu.splash_attention).

Native on a TPU, otherwise the same kernel code under the Pallas TPU interpreter.
Splash takes its mask as objects (CausalMask, LocalMask, ChunkedCausalMask, NumpyMask,
combined with `&` and per head with MultiHeadMask); the adapter builds them from the
case's mask description with splash's own classes, so splash's mask code is under test
and the oracles' dense mask (harness.core.masks.dense_mask) stays independent of it. Valid
lengths (harness.core.masks.Lengths) go in as segment ids, as splash's users mask padding:
padded queries and keys get ids of their own (PAD_Q, PAD_KV) that nothing else has.

`dropin(fn)` tests a replacement for the upstream kernel factory. Its signature is
    make_splash_mha(mask, *, block_sizes, head_shards, q_seq_shards) -> kernel
or, when it takes `is_mqa`, that of the private factory both public ones wrap,
    _make_splash_attention(mask, *, block_sizes, is_mqa, head_shards, q_seq_shards) -> kernel,
where kernel(q, k, v, segment_ids) takes q [q_heads, q_len, head_dim] and k, v
[kv_heads, kv_len, head_dim] ([kv_len, head_dim] under is_mqa) for one batch row.
A drop-in that takes `attn_logits_soft_cap` and `save_residuals` gets them; `sinks` go to the kernel.

The soft cap, sinks and residuals go through splash's own parameters: the factory's
attn_logits_soft_cap and save_residuals, the kernel's sinks [q_heads] (each where the
installed splash has it, read from its signatures).
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu import splash_attention as upstream
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

from harness.core import coverage as cov
from harness.core.case import REGIMES, Case
from harness.core.contract import About, Capabilities, Conventions, EmptyRows, Outputs, Restriction, register
from harness.core.inputs import Inputs
from harness.core.masks import MASK_COMPONENTS, SOME_KEY_VISIBLE, Mask, shows_some_key
from kernels._pallas import LANES, TpuKernel, block_names, lane_tiles

# Every tile is whole multiples of the 128 TPU lanes (LANES): the kernel raises "bkv_compute=...
# must be a multiple of 128" and "block_q must be a multiple of 128" (with segment ids,
# in the dkv kernel) otherwise (splash_attention_kernel.py, NUM_LANES).
FORWARD_BLOCKS = ("block_q", "block_kv", "block_kv_compute")
DKV_BLOCKS = ("block_q_dkv", "block_kv_dkv", "block_kv_dkv_compute")
DQ_BLOCKS = ("block_q_dq", "block_kv_dq")
# blocks are ints; present (value 1) means BlockSizes(use_fused_bwd_kernel=True), which
# computes dq inside the dkv kernel and forbids the dq block sizes (BlockSizes.__post_init__).
FUSED = "use_fused_bwd_kernel"


@st.composite
def _splash_blocks(draw: Any, case: Case) -> dict[str, int]:
    q_tiles, k_tiles = lane_tiles(case.q_len), lane_tiles(case.kv_len)
    # block_q / block_kv must divide the sequence (mask_info: "q_block_size should divide
    # q_seq_len"); the compute tile must divide its memory tile ("bkv must be a multiple
    # of bkv_compute") and be lane aligned.
    blocks = {"block_q": draw(st.sampled_from(q_tiles)), "block_kv": draw(st.sampled_from(k_tiles))}
    blocks["block_kv_compute"] = draw(st.sampled_from(lane_tiles(blocks["block_kv"])))
    blocks["block_q_dkv"] = draw(st.sampled_from(q_tiles))
    blocks["block_kv_dkv"] = draw(st.sampled_from(k_tiles))
    blocks["block_kv_dkv_compute"] = draw(st.sampled_from(lane_tiles(blocks["block_kv_dkv"])))
    if draw(st.booleans()):
        blocks[FUSED] = 1
    else:
        blocks["block_q_dq"] = draw(st.sampled_from(q_tiles))
        blocks["block_kv_dq"] = draw(st.sampled_from(k_tiles))
    return blocks


# Segment ids the adapter gives padding (harness.core.masks.Lengths): query rows past a batch row's
# valid length, and keys outside its [kv_start, kv_end). Negative, so no drawn id (>= 0) meets them,
# and different, so padding never sees padding.
PAD_Q, PAD_KV = -1, -2


def _parts(mask: Mask, shape: tuple[int, int], diagonal: int | None = None) -> list[mask_lib.Mask]:
    """Splash's own mask objects for the components shared by every batch row.

    diagonal: the bottom-right causal offset (default kv_len - q_len; with lengths, the row's own)."""
    q_len, kv_len = shape
    out: list[mask_lib.Mask] = []
    if mask.causal is not None:
        # CausalMask sees keys j <= i + offset: offset 0 is top-left, kv_len - q_len bottom-right.
        bottom_right = kv_len - q_len if diagonal is None else diagonal
        out.append(mask_lib.CausalMask(shape, offset=0 if mask.causal == "top_left" else bottom_right))
    if mask.window is not None:
        w = mask.window
        if w.is_causal:
            out.append(mask_lib.CausalMask(shape, offset=w.offset))
        else:
            out.append(mask_lib.LocalMask(shape, (w.left, w.right), offset=w.offset))
    if mask.chunk is not None:
        out.append(mask_lib.ChunkedCausalMask(shape, chunk_size=mask.chunk.size))
    if mask.block_sparse is not None:
        b = mask.block_sparse
        tiles = np.array([[c == "1" for c in row] for row in b.pattern])
        dense = np.kron(tiles, np.ones((b.block_q, b.block_kv), bool))[:q_len, :kv_len]
        out.append(mask_lib.NumpyMask(np.ascontiguousarray(dense)))
    return out


def splash_mask(
    mask: Mask, *, heads: int, q_len: int, kv_len: int, diagonal: int | None = None
) -> mask_lib.MultiHeadMask:
    """The case's mask (without segment ids and lengths, which go in as segment ids) as splash masks.

    diagonal: the bottom-right causal offset of one batch row (see _parts)."""
    shape = (q_len, kv_len)
    shared = _parts(mask, shape, diagonal)
    per_head = []
    for h in range(heads):
        parts = shared + (_parts(mask.heads[h], shape, diagonal) if mask.heads is not None else [])
        per_head.append(functools.reduce(operator.and_, parts) if parts else mask_lib.FullMask(shape))
    return mask_lib.MultiHeadMask(per_head)


def _factory(name: str, *, mqa: bool) -> cov.Api:
    """make_splash_mha or make_splash_mqa: the same parameters, is_mqa bound by each."""
    return cov.Api(
        name=f"splash_attention.{name}",
        locate=lambda: getattr(upstream, name),
        params=(
            cov.Param(
                name="mask",
                drawn="MultiHeadMask of CausalMask, LocalMask, ChunkedCausalMask, NumpyMask (block-sparse), "
                "FullMask, combined with & and per head",
                exercised=cov.always,
            ),
            cov.Param(name="block_sizes", drawn="every field drawn, or the defaults", exercised=cov.tiled),
            cov.Param(
                name="is_mqa",
                drawn=f"{mqa} (bound by {name}; the adapter calls make_splash_mqa when kv_heads == 1)",
                exercised=cov.mqa if mqa else (lambda case: not cov.mqa(case)),
            ),
            cov.Param(name="save_residuals", drawn="True (the logsumexp checked), False", exercised=cov.residuals),
            cov.Param(name="mask_value", why=cov.NO_MASK_VALUE),
            cov.soft_cap_param("attn_logits_soft_cap"),
            cov.Param(name="downcast_smem_data", why="how mask metadata is stored; no numerical effect"),
            cov.Param(name="head_shards", drawn="1", exercised=cov.always, why=cov.SHARDING),
            cov.Param(name="q_seq_shards", drawn="1", exercised=cov.always, why=cov.SHARDING),
            cov.Param(name="residual_checkpoint_name", why="a name for rematerialisation; no numerical effect"),
            cov.Param(name="interpret", why=cov.INTERPRET_FORCED),
        ),
    )


API = (
    _factory("make_splash_mha", mqa=False),
    _factory("make_splash_mqa", mqa=True),
    cov.Api(
        # The kernel object's call forwards *args to _splash_attention after its three mask infos.
        name="splash_attention.SplashAttentionKernel.__call__",
        locate=lambda: upstream.splash_attention_kernel._splash_attention,
        read=cov.positional("fwd_mask_info", "dq_mask_info", "dkv_mask_info"),
        params=(
            *cov.arrays(
                "[N, T, H], scaled by the adapter", "[K, S, H], or [S, H] under MQA", "[K, S, H], or [S, H] under MQA"
            ),
            cov.Param(
                name="segment_ids",
                drawn="SegmentIds(q, kv), orphan ids included; padding (valid lengths) as ids of its own",
                exercised=lambda case: case.mask.segments is not None or case.mask.lengths is not None,
            ),
            cov.Param(
                name="sinks",
                drawn="None or one logit per query head; their gradient dsinks checked",
                exercised=cov.sinks,
            ),
        ),
    ),
    cov.Api(
        name="splash_attention.BlockSizes",
        locate=lambda: upstream.BlockSizes,
        params=(
            *(
                cov.Param(name=name, drawn="lane-aligned tiles dividing their axis", exercised=cov.block(name))
                for name in FORWARD_BLOCKS + DKV_BLOCKS + DQ_BLOCKS
            ),
            cov.Param(name=FUSED, drawn="True, False", exercised=cov.block(FUSED)),
            *(
                cov.Param(
                    name=f"{x}_layout", why="the default HEAD_DIM_MINOR: the adapter's arrays are [heads, seq, dim]"
                )
                for x in "qkv"
            ),
        ),
    ),
)


def segment_ids(case: Case) -> tuple[np.ndarray, np.ndarray] | None:
    """(q ids [batch, q_len], kv ids [batch, kv_len]): the case's segment ids, with padding
    (harness.core.masks.Lengths) given ids of its own, as splash's users mask padding; None when neither."""
    m = case.mask
    if m.segments is None and m.lengths is None:
        return None
    if m.segments is not None:
        q_ids, kv_ids = m.segments.ids("q").copy(), m.segments.ids("kv").copy()
    else:
        q_ids = np.zeros((case.batch, case.q_len), np.int32)
        kv_ids = np.zeros((case.batch, case.kv_len), np.int32)
    if m.lengths is not None:
        for b in range(case.batch):
            q, start, end = m.lengths.valid(b, case.q_len, case.kv_len)
            q_ids[b, q:] = PAD_Q
            kv_ids[b, :start] = PAD_KV
            kv_ids[b, end:] = PAD_KV
    return q_ids, kv_ids


# What the installed splash takes, from its signatures rather than its version.
def mask_components(masks: Any) -> frozenset[str]:
    """The mask components the installed mask module `masks` expresses: every one, but a chunk mask only
    where it has ChunkedCausalMask (jax 0.4.30 and 0.5.3 lack it)."""
    return MASK_COMPONENTS if hasattr(masks, "ChunkedCausalMask") else MASK_COMPONENTS - {"chunk"}


# Each shape component's splash class (_parts).
_CLASSES = {"causal_top_left": "CausalMask", "causal_bottom_right": "CausalMask", "causal_offset": "CausalMask"}
_CLASSES |= {"window": "LocalMask", "chunk": "ChunkedCausalMask"}


def computable(masks: Any) -> tuple[str, ...]:
    """The mask components the installed splash computes in its kernels by one mask function, not loaded from
    memory as partial blocks: those whose class is a `_ComputableMask` (a single unique mask across heads
    takes that path, splash_attention_mask_info.py: "If the mask object defines a q_sequence and a
    mask_function, then make use of these in the kernel"). A bug of that function (its key offset) fails at
    each alike: Capabilities.mask_families names them as one."""
    base = getattr(masks, "_ComputableMask", None)
    if base is None:
        return ()
    return tuple(c for c, name in _CLASSES.items() if issubclass(getattr(masks, name, object), base))


COMPUTABLE = computable(mask_lib)
SOFT_CAP = cov.accepts(upstream.make_splash_mha, "attn_logits_soft_cap")
RESIDUALS = cov.accepts(upstream.make_splash_mha, "save_residuals")
SINKS = cov.accepts(getattr(upstream.splash_attention_kernel, "_splash_attention", lambda: None), "sinks")


def takes_head_dim(head_dim: int) -> bool:
    """Whether the installed splash takes `head_dim`, asked of the library itself: one forward traced
    (jax.eval_shape: no compile, no run, ~0.2 s). jax 0.7.0's forward kernel raises
    NotImplementedError("head_dim_v=64 should be a multiple of 128"); later releases take any
    head_dim (found by `nox -s matrix`, cell py3.11-jax0.7.0)."""
    mask = mask_lib.MultiHeadMask((mask_lib.FullMask((LANES, LANES)),))
    kernel = upstream.make_splash_mha(mask, head_shards=1, q_seq_shards=1)
    x = jax.ShapeDtypeStruct((1, LANES, head_dim), jnp.float32)
    try:
        jax.eval_shape(kernel, x, x, x)
    except NotImplementedError:
        return False
    return True


def takes_hidden_mask() -> bool:
    """Whether the installed splash builds a kernel for a mask that hides every key (one head, causal
    below the whole key range), asked of the library: every release up to 0.10.2 asserts
    (current_block_mask.size > 0) while processing the mask (the matrix's jax 0.7.0 cell found it)."""
    mask = mask_lib.MultiHeadMask((mask_lib.CausalMask((LANES, LANES), offset=-LANES),))
    try:
        upstream.make_splash_mha(mask, head_shards=1, q_seq_shards=1)
    except AssertionError:
        return False
    return True


# Head dims that are no multiple of the lane width, where the installed splash takes them.
LANE_HEAD_DIMS_ONLY = not takes_head_dim(64)
HEAD_DIMS = (128, 256) if LANE_HEAD_DIMS_ONLY else (64, 128, 32, 256)
# Every restriction the adapter applies, with its source (harness.core.contract.Restriction).
_K = "jax/experimental/pallas/ops/tpu/splash_attention/splash_attention_kernel.py"
RESTRICTIONS = (
    Restriction(on="dtypes", rule="no float16", choice="no TPU matmul type; splash's own tests use f32 and bf16"),
    Restriction(on="head_dims", rule="multiples of 128 where the installed splash needs them", probe="takes_head_dim"),
    Restriction(on="mask_components", rule="its mask classes; no additive bias", probe="API"),
    Restriction(on="restrictions:some_key_visible", rule="a mask hiding every key asserts", probe="takes_hidden_mask"),
    Restriction(
        on="violations", rule="q_len, kv_len multiples of 128", upstream=_K, check="must be a multiple of {NUM_LANES}"
    ),
    Restriction(on="violations", rule="head_dim a multiple of 128 where needed", probe="LANE_HEAD_DIMS_ONLY"),
    Restriction(on="violations", rule="blocks name every BlockSizes field it reads", probe="API"),
    Restriction(on="violations", rule="use_fused_bwd_kernel a flag", upstream=_K, check="use_fused_bwd_kernel: bool"),
    Restriction(
        on="violations",
        rule="tiles multiples of 128 dividing their axis",
        upstream="jax/experimental/pallas/ops/tpu/splash_attention/splash_attention_mask_info.py",
        check="should divide",
    ),
    Restriction(on="violations", rule="a hidden mask with equal heads asserts", probe="takes_hidden_mask"),
    Restriction(on="violations", rule="a drop-in takes the soft cap", probe="SOFT_CAP"),
)


class PallasSplash(TpuKernel):
    title = "Pallas TPU splash attention"
    about = About(
        summary="the Pallas TPU splash (sparse flash) attention kernel, its masks built with splash's own classes",
        source="jax/experimental/pallas/ops/tpu/splash_attention/splash_attention_kernel.py: make_splash_mha",
        cases=17,  # 15 smoke with the extreme regimes, 2 drawn (CPU s a case: benchmarks/results/matrix_budget.json)
        blocks="block_q, block_kv, block_kv_compute, the dkv and dq blocks, or use_fused_bwd_kernel",
        notes="padding as segment ids of its own; an empty row is NaN (no key tile visited) or an average of tiles",
        restrictions=RESTRICTIONS,
    )
    capabilities = Capabilities(
        # float16 is not a TPU matmul type; splash's tests use float32 and bfloat16.
        dtypes=("float32", "bfloat16"),
        head_dims=HEAD_DIMS,
        seq_lens=(128, 256, 384, 512),
        # Every mask component: splash's mask family covers each (no additive bias); per-row valid
        # lengths, which no splash mask class expresses, go in as padding segment ids (segment_ids()).
        mask_components=mask_components(mask_lib),
        mask_families=(("computable", COMPUTABLE),) if len(COMPUTABLE) > 1 else (),
        restrictions=frozenset() if takes_hidden_mask() else frozenset({SOME_KEY_VISIBLE}),
        dbias=False,
        soft_cap=SOFT_CAP,
        sinks=SINKS,
        residuals=RESIDUALS,
        # Not the offset regime: its backward recomputes p from a float32 logsumexp, which ~1e5 from zero
        # keeps ~1e-2 of precision (docs/findings/pallas_splash_lse_large_logits.md).
        regimes=tuple(r for r in REGIMES if r != "offset"),
    )
    conventions = Conventions(
        bias="none: splash takes no additive bias; attn_logits_soft_cap caps the logits before the mask",
        causal="CausalMask(offset): keys j <= i + offset; the adapter passes 0 (top-left) or kv_len - q_len",
        gqa="native: make_splash_mha takes kv_heads dividing q_heads; make_splash_mqa when kv_heads == 1",
        empty_rows="nan_or_convex",
        # a fixed key-block schedule per head; the backward reduces heads in grid order
        reproducible=True,
        batch_invariant=True,
        notes=(
            "no sm_scale argument: the adapter multiplies q by the scale (in the case dtype). "
            "Rows with no visible key are undefined upstream: NaN when the row's query tile visits no key "
            "tile (0/0), else an average of the visited tiles' values; checked as declared, row by row. "
            "With sinks the running max and sum start at the sink, so such rows are 0; "
            "the sinks are differentiated like q, k and v, and their gradient (dsinks) checked"
        ),
    )
    api = API

    def __init__(self, fn: Callable[..., Any] | None = None, name: str = "pallas_splash") -> None:
        # fn None: the upstream factory per case (make_splash_mqa for one kv head, else make_splash_mha).
        super().__init__(fn, name)

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return _splash_blocks(case)

    def empty_rows(self, case: Case) -> EmptyRows:
        # With sinks every row starts from the sink's max and a sum of 1, and adds nothing.
        return "zeros" if case.sinks else self.conventions.empty_rows

    def _shape_violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        for name, length in (("q_len", case.q_len), ("kv_len", case.kv_len)):
            if length % LANES:
                out.append(f"{name}={length} must be a multiple of {LANES}")
        if LANE_HEAD_DIMS_ONLY and case.head_dim % LANES:
            out.append(f"head_dim={case.head_dim} must be a multiple of {LANES} for this splash (takes_head_dim)")
        blocks = case.block_dict
        if blocks:
            need = set(FORWARD_BLOCKS + DKV_BLOCKS) | ({FUSED} if FUSED in blocks else set(DQ_BLOCKS))
            names = block_names(blocks, need=need, note=f"{FUSED}=1 replaces {DQ_BLOCKS}")
            if names:
                out.append(names)
                return out
            if blocks.get(FUSED, 1) != 1:
                out.append(f"{FUSED}={blocks[FUSED]} must be 1 (present) or absent")
            for name, length in (
                ("block_q", case.q_len),
                ("block_kv", case.kv_len),
                ("block_kv_compute", blocks["block_kv"]),
                ("block_q_dkv", case.q_len),
                ("block_kv_dkv", case.kv_len),
                ("block_kv_dkv_compute", blocks["block_kv_dkv"]),
                ("block_q_dq", case.q_len),
                ("block_kv_dq", case.kv_len),
            ):
                if name in blocks and (length % blocks[name] or blocks[name] % LANES):
                    out.append(f"{name}={blocks[name]} must be a multiple of {LANES} dividing {length}")
        return out

    def _own(self, name: str) -> Any:
        """splash's class `name` (BlockSizes, SegmentIds) from a drop-in's own module where it defines one,
        else upstream's: a copy of splash's module has its own QKVLayout, and its dkv kernel tests
        `k_layout is HEAD_DIM_MINOR` by identity, so upstream's default layout would read there as
        SEQ_MINOR (and loop over head_dim // block_kv_dkv_compute key tiles: none at head_dim 64;
        docs/findings/pallas_splash_layout_compared_by_identity.md)."""
        module = None if self.fn is None else inspect.getmodule(self.fn)
        return getattr(module, name, None) or getattr(upstream, name)

    def _block_sizes(self, case: Case) -> upstream.BlockSizes:
        block_sizes = self._own("BlockSizes")
        if not case.blocks:
            return block_sizes.get_default()
        blocks = case.block_dict
        fused = bool(blocks.pop(FUSED, 0))
        return block_sizes(**blocks, use_fused_bwd_kernel=fused)

    def _kernel(self, case: Case, *, residuals: bool = False, diagonal: int | None = None) -> tuple[Any, bool]:
        """The splash kernel for this case (for a bottom-right diagonal), and whether it takes MQA-shaped k/v."""
        mask = splash_mask(case.mask, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len, diagonal=diagonal)
        kw: dict[str, Any] = {"block_sizes": self._block_sizes(case), "head_shards": 1, "q_seq_shards": 1}
        if case.soft_cap is not None:
            kw["attn_logits_soft_cap"] = case.soft_cap
        if residuals:
            kw["save_residuals"] = True
        mqa = case.kv_heads == 1
        if self.fn is None:
            make = upstream.make_splash_mqa if mqa else upstream.make_splash_mha
            return make(mask, **kw), mqa
        # is_mqa picks the private factory's signature: only a drop-in that names it gets it.
        if cov.accepts(self.fn, "is_mqa", forwarded=False):
            return self.fn(mask, is_mqa=mqa, **kw), mqa
        return self.fn(mask, **kw), False

    def violations(self, case: Case) -> list[str]:
        out = self._shape_violations(case)
        if not out and self._asserts_on_hidden_mask(case):
            out.append(
                "every head's mask hides every key and the heads' masks are the same: splash's mask processing "
                "asserts (current_block_mask.size > 0) on it (docs/findings/pallas_splash_fully_masked_assert.md)"
            )
        if self.fn is not None:
            # A drop-in factory that lacks a parameter cannot be given the case.
            for name, wanted in (("attn_logits_soft_cap", case.soft_cap is not None),):
                if wanted and not cov.accepts(self.fn, name):
                    out.append(f"{self.name} takes no {name}")
        return out

    def _asserts_on_hidden_mask(self, case: Case) -> bool:
        """Whether building the kernel for a mask that hides every key in every head fails splash's own
        assertion (it does for identical heads: an empty grid after shrinking), asked of the library by
        building it, only for a mask that hides every key (masks.shows_some_key)."""
        if shows_some_key(case.mask, batch=case.batch, q_len=case.q_len, kv_len=case.kv_len):
            return False
        for d in set(case.mask.diagonals(batch=case.batch, q_len=case.q_len, kv_len=case.kv_len)):
            try:
                self._kernel(case, diagonal=d)
            except AssertionError:
                return True
        return False

    def _call(self, case: Case, inputs: Inputs, *, residuals: bool) -> Callable[..., Any]:
        """f(q, k, v[, sinks]) over the batch: the output [B, Hq, Lq, D], or with `residuals` the logsumexp
        [B, Hq, Lq]. The sinks are an argument, so jax.vjp gives splash's own dsinks."""
        scale = case.sm_scale
        # One kernel per diagonal: bottom-right causal with lengths sits at each row's own.
        diagonals = case.mask.diagonals(batch=case.batch, q_len=case.q_len, kv_len=case.kv_len)
        kernels = {d: self._kernel(case, residuals=residuals, diagonal=d) for d in set(diagonals)}
        ids = segment_ids(case)
        seg = None if ids is None else (jnp.asarray(ids[0]), jnp.asarray(ids[1]))

        def f(q, k, v, sinks=None):
            # Splash applies no softmax scale; scaling q first is how its users apply one.
            q = q * jnp.asarray(scale, q.dtype)
            outs = []
            for b in range(case.batch):  # splash kernels take one batch row
                kernel, mqa = kernels[diagonals[b]]
                kb, vb = (k[b, 0], v[b, 0]) if mqa else (k[b], v[b])
                row_ids = None if seg is None else self._own("SegmentIds")(q=seg[0][b], kv=seg[1][b])
                extra = {} if sinks is None else {"sinks": sinks}
                got = kernel(q[b], kb, vb, segment_ids=row_ids, **extra)
                # save_residuals: (out, (logsumexp [q_heads, q_len],)).
                outs.append(got[1][0] if residuals else got)
            return jnp.stack(outs)

        return f

    def jax_fn(self, case: Case) -> Callable[..., Any] | None:
        """f(q, k, v) for the compile checks (harness.tpu.compile): the same kernels run() calls.
        None with sinks, which f would take as a fourth array the compile checks do not build."""
        return None if case.sinks else self._call(case, None, residuals=False)

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        # The logsumexp from a separate forward call: splash's residual-saving forward has no VJP of its own.
        lse = (lambda: self._call(case, inputs, residuals=True)) if case.residuals else None
        return self.outputs(self._call(case, inputs, residuals=False), inputs, grads=grads, lse=lse)


def dropin(fn: Callable[..., Any], *, name: str) -> PallasSplash:
    """Test `fn`, a replacement for make_splash_mha (or _make_splash_attention), as this kernel."""
    return PallasSplash(fn, name=name)


register(PallasSplash())
