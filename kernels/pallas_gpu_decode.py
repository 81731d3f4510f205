"""The Pallas GPU decode-attention kernel (jax.experimental.pallas.ops.gpu.decode_attention).

One query per sequence (q_len 1) attends to keys in [start_idx, kv_seq_len) of its row,
split over `k_splits` parallel key ranges whose partial softmaxes are merged at the end.
Native on a GPU (Triton), otherwise the same kernel code with `interpret=True` on CPU.
`mqa` serves one kv head, `gqa` several; the adapter calls `mqa` for kv_heads == 1 and
`gqa` otherwise, so both public entry points are under test. The case's per-row key
lengths and starts (harness.core.masks.Lengths kv, kv_starts) go in as kv_seq_len and start_idx.

blocks: block_h, block_k, k_splits (upstream's names and meaning).

`dropin(fn)` tests a replacement for `gqa` (or for `mqa`, when its name ends in "mqa"):
    gqa(q, k, v, start_idx, kv_seq_len, *, sm_scale, block_h, block_k, k_splits, interpret)
with q [batch, q_heads, head_dim], k, v [batch, kv_len, kv_heads, head_dim]
(mqa: [batch, kv_len, head_dim]).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental.pallas.ops.gpu import decode_attention as upstream

from harness.core import coverage as cov
from harness.core.case import DTYPES, Case
from harness.core.contract import About, Capabilities, Conventions, Outputs, Restriction, register
from harness.core.inputs import Inputs
from kernels._pallas import GpuKernel, block_names

BLOCKS = ("block_h", "block_k", "k_splits")
# The mask components and the parameters that take them.
LENGTH_PARAMS = {"kv_lengths": "kv_seq_len", "kv_starts": "start_idx"}
# Triton's tl.dot needs every matmul dimension >= 16: "block_k must be >= 16" and each of the
# k_splits key ranges at least 16 long ("k_seq_len divided by k_splits must be >= 16").
MIN_TILE = 16


def _split_options(kv_len: int) -> list[int]:
    # "k_seq_len must be divisible by k_splits"
    return [s for s in (1, 2, 4, 8, 16) if kv_len % s == 0 and kv_len // s >= MIN_TILE]


# Every restriction the adapter applies, with its source (harness.core.contract.Restriction).
_D = "jax/experimental/pallas/ops/gpu/decode_attention.py"
_SPLITS = dict(upstream=_D, check="must be divisible by {k_splits=}")
RESTRICTIONS = (
    Restriction(on="head_dims", rule="the values drawn", choice="no head_dim check upstream"),
    Restriction(on="q_lens", rule="one query per sequence", upstream=_D, check="num_heads, head_dim = q.shape"),
    Restriction(on="mask_components", rule="kv_seq_len and start_idx: its parameters", probe="API"),
    Restriction(on="grads", rule="forward only", choice="the module defines no backward pass"),
    Restriction(on="violations", rule="blocks named: default block_k 256", upstream=_D, check="block_k: int = 256"),
    Restriction(on="violations", rule="blocks name block_h, block_k, k_splits", probe="API"),
    Restriction(on="violations", rule="k_splits divides kv_len into >= 16", **_SPLITS),
    Restriction(on="violations", rule="block_k >= 16 dividing the split", upstream=_D, check="block_k must be >= 16"),
    Restriction(on="violations", rule="block_h positive", choice="a count of heads"),
)


@st.composite
def _decode_blocks(draw: Any, case: Case) -> dict[str, int]:
    k_splits = draw(st.sampled_from(_split_options(case.kv_len)))
    split = case.kv_len // k_splits
    # block_k is clamped to the split length, which it must then divide.
    block_k = draw(st.sampled_from([b for b in (16, 32, 64, 128) if b <= split and split % b == 0]))
    # block_h: query heads per program; past the group size the extra rows are masked loads.
    return {"block_h": draw(st.sampled_from((16, 8, 32))), "block_k": block_k, "k_splits": k_splits}


def _entry_api(name: str) -> cov.Api:
    """gqa or mqa: the same parameters; the adapter calls mqa for one kv head."""
    called = cov.mqa if name == "mqa" else (lambda case: not cov.mqa(case))

    def batched(case: Case) -> bool:
        # The arrays' batch axis is exercised by a batch of more than one row: gqa vmaps over it, and
        # jax 0.4.36 to 0.8.0 unpacked its output along that axis (docs/history.md DEC-2).
        return called(case) and case.batch > 1

    k_shape = "[B, S, H]" if name == "mqa" else "[B, S, K, H]"
    batch = "counted: cases with B > 1 (a batch of one leaves the batch axis unexercised)"
    return cov.Api(
        name=f"gpu.decode_attention.{name}",
        locate=lambda: getattr(upstream, name),
        params=(
            cov.Param(name="q", drawn="[B, N, H] in the case dtype, B 1 to 3", exercised=batched, why=batch),
            cov.Param(name="k", drawn=k_shape, exercised=batched, why=batch),
            cov.Param(name="v", drawn=k_shape, exercised=batched, why=batch),
            cov.Param(
                name="start_idx",
                drawn="per-row key starts (0, 1, aligned, any), or None",
                exercised=lambda c: called(c) and cov.component("kv_starts")(c),
            ),
            cov.Param(
                name="kv_seq_len",
                drawn="per-row key lengths (0, 1, aligned, any), or None",
                exercised=lambda c: called(c) and cov.component("kv_lengths")(c),
            ),
            cov.Param(
                name="sm_scale",
                drawn=cov.SCALES_DRAWN,
                exercised=lambda c: called(c) and cov.explicit_scale(c),
            ),
            *(
                cov.Param(
                    name=b, drawn="valid tiles and splits", exercised=lambda c, b=b: called(c) and cov.block(b)(c)
                )
                for b in BLOCKS
            ),
            cov.Param(name="num_warps", why=cov.LAUNCH),
            cov.Param(name="num_stages", why=cov.LAUNCH),
            cov.Param(name="grid", why="the kernel's own grid from the shapes; a custom grid is a launch choice"),
            cov.Param(
                name="interpret", drawn="True off a GPU, False on one", exercised=called, why="set by the platform"
            ),
            cov.Param(name="debug", why=cov.DEBUG),
            cov.Param(name="return_residuals", why=cov.NO_RESIDUALS),
            cov.Param(name="normalize_output", why="the default True: the adapter compares the normalised output"),
        ),
    )


API = (_entry_api("gqa"), _entry_api("mqa"))


class PallasGpuDecode(GpuKernel):
    title = "Pallas GPU decode attention"
    about = About(
        summary="the Pallas GPU decode-attention kernel (q_len 1), under the Pallas GPU interpreter off a GPU",
        source="jax/experimental/pallas/ops/gpu/decode_attention.py: gqa, mqa",
        cases=10,  # 8 smoke (CPU s a case: benchmarks/results/matrix_budget.json)
        blocks="block_h, block_k, k_splits",
        restrictions=RESTRICTIONS,
    )
    capabilities = Capabilities(
        dtypes=DTYPES,
        head_dims=(64, 128, 32),
        seq_lens=(64, 128, 256),
        q_lens=(1,),
        mask_components=frozenset({"kv_lengths", "kv_starts"}),
        max_batch=3,
        max_group=8,
        grads=False,
        dbias=False,
    )
    conventions = Conventions(
        bias="none: the kernel takes no additive bias",
        causal="none: one query per sequence sees its keys [start_idx, kv_seq_len)",
        gqa="native: gqa takes kv_heads dividing q_heads; mqa for one kv head",
        empty_rows="zeros",
        # one program per (batch, kv head, split): its splits combined in a fixed order
        reproducible=True,
        batch_invariant=True,
        notes=(
            "layout q [batch, q_heads, head_dim], k/v [batch, kv_len, kv_heads, head_dim] (the adapter "
            "transposes). A row with no visible key (start_idx >= kv_seq_len) skips every split and divides "
            "0 by the denominator plus eps: 0. Forward only (no VJP upstream)"
        ),
    )
    api = API

    def __init__(self, fn: Callable[..., Any] | None = None, name: str = "pallas_gpu_decode") -> None:
        # fn None: upstream's mqa for one kv head, else gqa (_entry).
        super().__init__(fn, name)
        # The key ranges where the installed gqa (or the drop-in) takes them: jax 0.4.30's has neither
        # start_idx nor kv_seq_len (its parameter after q, k, v is sm_scale).
        entry = upstream.gqa if fn is None else fn
        components = {c for c, param in LENGTH_PARAMS.items() if cov.accepts(entry, param)}
        self.capabilities = dataclasses.replace(self.capabilities, mask_components=frozenset(components))

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return _decode_blocks(case)

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        blocks = case.block_dict
        if not blocks:
            return out + [f"blocks must name {list(BLOCKS)} (upstream's defaults need kv_len >= 256)"]
        names = block_names(blocks, need=BLOCKS)
        if names:
            return out + [names]
        splits = blocks["k_splits"]
        if splits not in _split_options(case.kv_len):
            out.append(f"k_splits={splits} must divide kv_len={case.kv_len} into ranges of >= {MIN_TILE} keys")
        elif (case.kv_len // splits) % min(blocks["block_k"], case.kv_len // splits) or blocks["block_k"] < MIN_TILE:
            out.append(f"block_k={blocks['block_k']} must be >= {MIN_TILE} and divide kv_len/k_splits")
        if blocks["block_h"] < 1:
            out.append(f"block_h={blocks['block_h']} must be positive")
        return out

    def _entry(self, case: Case) -> tuple[Callable[..., Any], bool]:
        """The function to call and whether it takes MQA-shaped k/v."""
        if self.fn is not None:
            return self.fn, getattr(self.fn, "__name__", "").endswith("mqa")
        return (upstream.mqa, True) if case.kv_heads == 1 else (upstream.gqa, False)

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        lengths = case.mask.lengths
        start = None if lengths is None or lengths.kv_starts is None else jnp.asarray(lengths.kv_starts, jnp.int32)
        end = None if lengths is None or lengths.kv is None else jnp.asarray(lengths.kv, jnp.int32)
        fn, mqa = self._entry(case)
        interpret = not self.native()
        kw = dict(case.block_dict)

        def f(q, k, v):
            q = q[:, :, 0, :]
            # [batch, kv_heads, kv_len, head_dim] -> the kernel's [batch, kv_len, kv_heads, head_dim].
            k, v = (a[:, 0] if mqa else jnp.swapaxes(a, 1, 2) for a in (k, v))
            ranges = {"start_idx": start} if start is not None else {}
            ranges |= {"kv_seq_len": end} if end is not None else {}
            out = fn(q, k, v, **ranges, sm_scale=case.sm_scale, interpret=interpret, **kw)
            return out[:, :, None, :]

        return self.outputs(f, inputs, grads=False)


def dropin(fn: Callable[..., Any], *, name: str) -> PallasGpuDecode:
    """Test `fn`, a replacement for decode_attention.gqa (or mqa, by its name), as this kernel."""
    return PallasGpuDecode(fn, name=name)


register(PallasGpuDecode())
