"""Shared adapter for tokamax.dot_product_attention, one registered kernel per implementation.

tokamax (PyPI; needs jax >= 0.9.2) offers several implementations behind one API: "xla" and
"xla_chunked" run anywhere, "mosaic" needs a TPU, "triton" and "cudnn" a GPU. Each is its own
kernel module (kernels/tokamax_*.py) built on `TokamaxAttention` here; a module whose
implementation cannot run on this host registers nothing. Whether tokamax is usable is
decided by importing it and reading its signature (`available`), never by version numbers:
in an environment without it the modules are skipped like a missing torch
(harness.contract.OPTIONAL_FRAMEWORKS).

The API takes the case's native parameters: `is_causal` (top-left), `query_seq_lengths` and
`key_value_seq_lengths` (harness.masks.Lengths q and kv), `bias`, `scale`, GQA heads.

`dropin(fn)` in each module tests a replacement with the upstream signature:
    dot_product_attention(query, key, value, bias=None, mask=None, *, scale, is_causal,
                          query_seq_lengths, key_value_seq_lengths, implementation)
with query [batch, q_len, q_heads, head_dim] and key, value [batch, kv_len, kv_heads, head_dim].
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import tokamax
from absl import flags

from harness import compat, placement
from harness import coverage as cov
from harness.case import DTYPES, Case
from harness.contract import Capabilities, Conventions, Implementation, Outputs
from harness.inputs import Inputs
from harness.jaxvjp import jax_outputs

# The parameters the adapter passes; a tokamax without one of them is not usable here.
NEEDED = ("is_causal", "query_seq_lengths", "key_value_seq_lengths", "scale", "implementation")


def implementations() -> tuple[str, ...]:
    """The implementation names this tokamax accepts (from its signature), or () when unusable."""
    fn = getattr(tokamax, "dot_product_attention", None)
    if fn is None:
        return ()
    params = inspect.signature(fn).parameters
    if any(p not in params for p in NEEDED):
        return ()
    names = set()
    for arg in typing.get_args(params["implementation"].annotation) or ():
        names |= {a for a in typing.get_args(arg) if isinstance(a, str)}
        if isinstance(arg, str):
            names.add(arg)
    return tuple(sorted(names))


def available(implementation: str) -> bool:
    """Whether `implementation` exists in this tokamax and can run on this host's hardware."""
    if implementation not in implementations():
        return False
    platform = compat.jax_platform()
    return {"mosaic": platform == "tpu", "triton": platform == "gpu", "cudnn": platform == "gpu"}.get(
        implementation, True
    )


def dtypes() -> tuple[str, ...]:
    """Every dtype, but float16 not on a CPU backend: tokamax asks dot_general for the F16_F16_F32
    algorithm preset, which XLA:CPU refuses ("ValueError: The precision 'F16_F16_F32' is not
    supported by dot_general on CPU", tokamax 0.0.12 on jax 0.10.2; a platform limit)."""
    return DTYPES if compat.jax_platform() != "cpu" else tuple(d for d in DTYPES if d != "float16")


def api(implementation: str) -> cov.Api:
    """Every parameter of tokamax.dot_product_attention, as this adapter drives it."""
    return cov.Api(
        name="tokamax.dot_product_attention",
        locate=lambda: tokamax.dot_product_attention,
        params=(
            cov.Param(name="query", drawn="[B, T, N, H] in the case dtype", exercised=cov.always),
            cov.Param(name="key", drawn="[B, S, K, H]; K divides N (GQA, MQA)", exercised=cov.always),
            cov.Param(name="value", drawn="[B, S, K, H]", exercised=cov.always),
            cov.Param(name="bias", drawn="float [B, N, T, S], or None", exercised=cov.has_bias),
            cov.Param(name="mask", why="not passed yet: no boolean mask is in this kernel's capabilities (issue 11)"),
            cov.Param(name="scale", drawn="1/sqrt(H), 1.0, 0.25, 0.03", exercised=cov.explicit_scale),
            cov.Param(name="is_causal", drawn="True, False", exercised=cov.causal_top_left),
            cov.Param(
                name="query_seq_lengths", drawn="per-row query lengths, or None", exercised=cov.component("q_lengths")
            ),
            cov.Param(
                name="key_value_seq_lengths",
                drawn="per-row key lengths, or None",
                exercised=cov.component("kv_lengths"),
            ),
            cov.Param(name="local_window_size", why="not passed yet: windows are not in this kernel's capabilities"),
            cov.Param(name="logits_soft_cap", why=cov.NO_SOFT_CAP),
            cov.Param(name="precision", why="the default precision for the dtype, not yet drawn"),
            cov.Param(name="implementation", drawn=f'"{implementation}"', exercised=cov.always, why="one per kernel"),
            cov.Param(name="q_sharding", why=cov.SHARDING),
        ),
    )


class TokamaxAttention(Implementation):
    role = "kernel"
    framework = "jax"
    capabilities = Capabilities(
        dtypes=DTYPES,
        head_dims=(64, 32, 128),
        seq_lens=(16, 64, 128),
        mask_components=frozenset({"causal_top_left", "q_lengths", "kv_lengths", "bias"}),
    )
    conventions = Conventions(
        bias="QK^T * scale + bias",
        causal="top-left (is_causal; query i sees keys j <= i)",
        gqa="native: key/value heads dividing the query heads",
        empty_rows="uniform",
        notes=(
            "layout [batch, seq, heads, head_dim] (the adapter transposes). Masked logits get a finite "
            "value, so a query row with no visible key (a padded query beyond query_seq_lengths, or a "
            "sequence whose key_value_seq_lengths is 0) is the plain average of every value row"
        ),
    )

    def __init__(self, implementation: str, fn: Callable[..., Any] | None = None, name: str | None = None) -> None:
        self.capabilities = dataclasses.replace(self.capabilities, dtypes=dtypes())
        self.implementation = implementation
        self.api = (api(implementation),)
        self.fn = fn or tokamax.dot_product_attention
        self.name = name or f"tokamax_{implementation}"
        self.description = f'tokamax.dot_product_attention(implementation="{implementation}")' + (
            "" if fn is None else f" drop-in {name}"
        )

    def backend(self) -> str:
        return compat.jax_platform()

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        if not flags.FLAGS.is_parsed():
            # tokamax reads its absl flags on first use and, when nobody parsed them, parses
            # sys.argv: the host program's command line (`run --kernel ...`), which absl rejects
            # (UnrecognizedFlagError). Its defaults are what the harness tests.
            flags.FLAGS.mark_as_parsed()
        lengths = case.mask.lengths
        q_lens = None if lengths is None or lengths.q is None else jnp.asarray(lengths.q, jnp.int32)
        kv_lens = None if lengths is None or lengths.kv is None else jnp.asarray(lengths.kv, jnp.int32)
        causal = case.mask.causal == "top_left"

        def f(q, k, v, *bias):
            q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))
            out = self.fn(
                q,
                k,
                v,
                bias[0] if bias else None,
                scale=case.sm_scale,
                is_causal=causal,
                query_seq_lengths=q_lens,
                key_value_seq_lengths=kv_lens,
                implementation=self.implementation,
            )
            return jnp.swapaxes(out, 1, 2)

        return jax_outputs(f, inputs, grads=grads, device=placement.kernel_device())
