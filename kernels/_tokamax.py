"""Shared adapter for tokamax.dot_product_attention, one registered kernel per implementation.

tokamax (PyPI; needs jax >= 0.9.2) offers several implementations behind one API: "xla" and
"xla_chunked" run anywhere, "triton" and "cudnn" need a GPU. Each is its own kernel module
(kernels/tokamax_*.py) built on `TokamaxAttention` here; a module whose implementation cannot run
on this host registers nothing. "mosaic", a Pallas TPU kernel that runs anywhere under the Pallas
interpreters, has an adapter of its own (kernels/tokamax_mosaic.py) that uses the helpers here.
Whether tokamax is usable is decided by importing it and reading its signature (`available`), never by version numbers:
in an environment without it the modules are skipped like a missing torch
(harness.core.contract.OPTIONAL_FRAMEWORKS).

The API takes the case's native parameters: `is_causal` (top-left), `query_seq_lengths` and
`key_value_seq_lengths` (harness.core.masks.Lengths q and kv), `bias`, `scale`, GQA heads, and:
- `local_window_size=(before, after)`: a window at offset 0 (an unbounded side as the longer
  sequence, which bounds nothing), at q_len != kv_len only where the implementation builds it right
  there (`_takes_unequal_windows`: tokamax 0.0.12 built the query rows' key range from the key
  positions and failed or mis-shaped, docs/findings/tokamax_local_window_unequal_lengths.md; 0.0.17
  does not). Windows at another offset, and those, go in through `mask`.
- `mask`: a boolean [batch, q_heads, q_len, kv_len] array for the components that have no
  parameter of their own (chunk, block-sparse, segments, per-head masks, those windows), built from
  the mask description by harness.core.masks.dense_mask; is_causal and the lengths still go in natively.
- `logits_soft_cap`: the case's soft cap (Case.soft_cap), where the implementation
  takes one (a probe call; tokamax's cudnn path raises NotImplementedError).
- `precision`: blocks flag precision_highest=1 passes jax.lax.Precision.HIGHEST (absent: None,
  the default); it changes how a backend rounds the matmuls (a TPU's default float32 matmul
  is bfloat16-based), never the mathematics.

`dropin(fn)` of each registered kernel tests a replacement with the upstream signature:
    dot_product_attention(query, key, value, bias=None, mask=None, *, scale, is_causal,
                          query_seq_lengths, key_value_seq_lengths, local_window_size,
                          logits_soft_cap, precision, implementation)
with query [batch, q_len, q_heads, head_dim] and key, value [batch, kv_len, kv_heads, head_dim].
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import inspect
import typing
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import tokamax
from absl import flags
from hypothesis import strategies as st

from harness.core import coverage as cov
from harness.core.case import DTYPES, Case
from harness.core.contract import (
    About,
    Capabilities,
    Conventions,
    Implementation,
    NotInThisRelease,
    Outputs,
    Restriction,
    register,
)
from harness.core.inputs import Inputs
from harness.core.jaxvjp import jax_outputs
from harness.core.masks import Mask, Window, dense_mask
from harness.runtime import compat, placement

# The parameters the adapter passes; a tokamax without one of them is not usable here.
NEEDED = (
    "is_causal",
    "query_seq_lengths",
    "key_value_seq_lengths",
    "scale",
    "implementation",
    "mask",
    "local_window_size",
    "logits_soft_cap",
    "precision",
)
PRECISION = "precision_highest"
# Mask components that go in through the boolean `mask` argument (and windows local_window_size cannot take).
ARRAY_MASKED = ("window", "chunk", "block_sparse", "segments", "per_head")


def implementations() -> tuple[str, ...]:
    """The implementation names this tokamax accepts (from its signature), or () when unusable."""
    fn = getattr(tokamax, "dot_product_attention", None)
    if fn is None:
        return ()
    params = inspect.signature(fn).parameters
    if any(p not in params for p in NEEDED):
        return ()
    return tuple(sorted(_literals(params["implementation"].annotation)))


def _literals(annotation: Any) -> set[str]:
    """Every string literal in a type annotation: through unions, generics and type aliases (tokamax 0.0.17
    declares `type Implementation = Literal["mosaic", ...]`; 0.0.12 wrote the Literal out)."""
    if isinstance(annotation, str):
        return {annotation}
    value = getattr(annotation, "__value__", None)  # a typing.TypeAliasType
    if value is not None:
        return _literals(value)
    return {name for arg in typing.get_args(annotation) for name in _literals(arg)}


# The hardware an implementation runs on only (contract.About.needs); the others run anywhere.
NEEDS = {"triton": "gpu", "cudnn": "gpu"}


def available(implementation: str) -> bool:
    """Whether `implementation` exists in this tokamax and can run on this host's hardware."""
    needs = NEEDS.get(implementation)
    return implementation in implementations() and (needs is None or compat.jax_platform() == needs)


def register_implementation(implementation: str, *, cases: int) -> None:
    """Define the kernel of `implementation` where this tokamax has it, with its matrix budget
    (contract.About.cases); registered where its hardware is (`available`)."""
    offered = implementations()
    if implementation not in offered:
        raise NotInThisRelease(
            f"tokamax {importlib.metadata.version('tokamax')} has no implementation {implementation!r}"
            f" (dot_product_attention offers {', '.join(offered) or 'none this adapter can drive'})"
        )
    register(TokamaxAttention(implementation, cases=cases), here=available(implementation))


def dtypes() -> tuple[str, ...]:
    """Every dtype, but float16 not on a CPU backend: tokamax asks dot_general for the F16_F16_F32
    algorithm preset, which XLA:CPU refuses ("ValueError: The precision 'F16_F16_F32' is not
    supported by dot_general on CPU", tokamax 0.0.12 on jax 0.10.2; a platform limit)."""
    return DTYPES if compat.jax_platform() != "cpu" else tuple(d for d in DTYPES if d != "float16")


# Every restriction the adapter applies, with its source (harness.core.contract.Restriction).
RESTRICTIONS = (
    Restriction(
        on="dtypes", rule="no float16 on a CPU backend", choice="measured: XLA:CPU refuses F16_F16_F32 (dtypes)"
    ),
    Restriction(
        on="head_dims", rule="the values drawn", choice="no head_dim limit is read; GPU/TPU limits unknown here"
    ),
    Restriction(on="mask_components", rule="its parameters and the boolean mask", probe="NEEDED"),
    Restriction(
        on="mask_components",
        rule="local_window_size at q_len != kv_len only where the implementation builds it right (else the mask)",
        probe="_takes_unequal_windows",
    ),
    Restriction(on="violations", rule="blocks hold only precision_highest", choice="the adapter's own flag"),
    Restriction(on="violations", rule="logits_soft_cap where the implementation takes it", probe="_takes_soft_cap"),
)


def api(implementation: str, split: Callable[[Case], tuple[tuple[int, int] | None, Any]]) -> cov.Api:
    """Every parameter of tokamax.dot_product_attention, as this adapter drives it (`split`: its `split_mask`)."""
    return cov.Api(
        name="tokamax.dot_product_attention",
        locate=lambda: tokamax.dot_product_attention,
        params=(
            *cov.dot_product_arrays(),
            cov.Param(
                name="mask",
                drawn="boolean [B, N, T, S]: other windows, chunk, block-sparse, segments, per-head masks",
                exercised=lambda case: split(case)[1] is not None,
            ),
            cov.scale_param("scale"),
            cov.Param(name="is_causal", drawn="True, False", exercised=cov.causal_top_left),
            cov.Param(
                name="query_seq_lengths", drawn="per-row query lengths, or None", exercised=cov.component("q_lengths")
            ),
            cov.Param(
                name="key_value_seq_lengths",
                drawn="per-row key lengths, or None",
                exercised=cov.component("kv_lengths"),
            ),
            cov.Param(
                name="local_window_size",
                drawn="(left, right) for windows at offset 0 (at q_len != kv_len where built right there)",
                exercised=lambda case: split(case)[0] is not None,
            ),
            cov.soft_cap_param("logits_soft_cap"),
            cov.Param(
                name="precision", drawn="None, HIGHEST (block flag precision_highest)", exercised=cov.block(PRECISION)
            ),
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
        mask_components=frozenset(
            {"causal_top_left", "q_lengths", "kv_lengths", "bias", "causal_offset", *ARRAY_MASKED}
        ),
    )
    conventions = Conventions(
        bias="QK^T * scale + bias",
        causal="top-left (is_causal; query i sees keys j <= i)",
        gqa="native: key/value heads dividing the query heads",
        empty_rows="uniform",
        # the XLA (or Triton, cuDNN) program of one case: the same bits each call
        reproducible=True,
        # Every quantity: the exactness probe holds to the bit what the installed release keeps bitwise.
        batch_invariant=(
            "by an ulp on the CPU: a batch of one is computed unbatched, another program "
            "(docs/findings/tokamax_xla_batch_of_one.md)"
        ),
        notes=(
            "layout [batch, seq, heads, head_dim] (the adapter transposes). Masked logits get a finite "
            "value, so a query row with no visible key (a padded query beyond query_seq_lengths, a "
            "sequence whose key_value_seq_lengths is 0, or a row the mask hides entirely) is the plain "
            "average of every value row"
        ),
    )

    def __init__(
        self, implementation: str, fn: Callable[..., Any] | None = None, name: str | None = None, *, cases: int = 0
    ) -> None:
        self.fn = fn or tokamax.dot_product_attention
        self.about = About(
            summary=f'tokamax.dot_product_attention(implementation="{implementation}")',
            source="tokamax/_src/ops/attention/api.py: dot_product_attention",
            cases=cases,
            needs=NEEDS.get(implementation),
            blocks="precision_highest (`precision=HIGHEST`)",
            notes="float16 only off a CPU backend" + ("" if implementation.startswith("xla") else "; not run here"),
            restrictions=RESTRICTIONS,
        )
        # A soft cap is drawn where the signature takes one; an implementation that refuses it at
        # call time (cudnn: NotImplementedError) is refused by violations() through the probe.
        self.capabilities = dataclasses.replace(
            self.capabilities, dtypes=dtypes(), soft_cap=cov.accepts(self.fn, "logits_soft_cap")
        )
        self.implementation = implementation
        self.api = (api(implementation, self.split_mask),)
        self.name = name or f"tokamax_{implementation}"
        self.description = f'tokamax.dot_product_attention(implementation="{implementation}")' + (
            "" if fn is None else f" drop-in {name}"
        )

    def backend(self) -> str:
        return compat.jax_platform()

    def dropin(self, fn: Callable[..., Any], *, name: str) -> TokamaxAttention:
        """Test `fn`, a function with the tokamax.dot_product_attention signature, as this implementation."""
        return TokamaxAttention(self.implementation, fn, name=name, cases=self.about.cases)

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]]:
        return st.sampled_from(({}, {PRECISION: 1}))

    def empty_row_fill(self, case: Case) -> str | None:
        # The XLA implementations mask their logits with where(mask, logits, large negative): measured, a uniform
        # row adds to dv alone. The others are not measured here.
        return "replaced" if self.implementation in ("xla", "xla_chunked") else None

    def split_mask(self, case: Case) -> tuple[tuple[int, int] | None, np.ndarray | None]:
        """(local_window_size, boolean mask) of the case, as `run` passes them (_split_mask)."""
        window = case.mask.window
        unequal = window is not None and window.offset == 0 and case.q_len != case.kv_len
        return _split_mask(case, unequal=unequal and _takes_unequal_windows(self.fn, self.implementation))

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        if set(case.block_dict) - {PRECISION} or set(case.block_dict.values()) - {1}:
            out.append(f"blocks may hold only {PRECISION}=1; got {case.block_dict}")
        if case.soft_cap is not None and not _takes_soft_cap(self.fn, self.implementation):
            out.append(f'implementation="{self.implementation}" raises NotImplementedError for logits_soft_cap')
        return out

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        default_flags()
        lengths = case.mask.lengths
        q_lens = None if lengths is None or lengths.q is None else jnp.asarray(lengths.q, jnp.int32)
        kv_lens = None if lengths is None or lengths.kv is None else jnp.asarray(lengths.kv, jnp.int32)
        causal = case.mask.causal == "top_left"
        window, array_mask = self.split_mask(case)
        array_mask = None if array_mask is None else jnp.asarray(array_mask)
        kw = {
            "scale": case.sm_scale,
            "is_causal": causal,
            "query_seq_lengths": q_lens,
            "key_value_seq_lengths": kv_lens,
            "local_window_size": window,
            "logits_soft_cap": case.soft_cap,
            "precision": jax.lax.Precision.HIGHEST if PRECISION in case.block_dict else None,
            "implementation": self.implementation,
        }

        def f(q, k, v, *bias):
            q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))
            out = self.fn(q, k, v, bias[0] if bias else None, array_mask, **kw)
            return jnp.swapaxes(out, 1, 2)

        return jax_outputs(f, inputs, grads=grads, device=placement.kernel_device())


def default_flags() -> None:
    if not flags.FLAGS.is_parsed():
        # tokamax reads its absl flags on first use and, when nobody parsed them, parses
        # sys.argv: the host program's command line (`run --kernel ...`), which absl rejects
        # (UnrecognizedFlagError). Its defaults are what the harness tests.
        flags.FLAGS.mark_as_parsed()


def _bound(side: int | None, case: Case) -> int:
    # An unbounded side as a bound no query reaches past: the longer sequence.
    return max(case.q_len, case.kv_len) if side is None else side


def _split_mask(case: Case, *, unequal: bool = False) -> tuple[tuple[int, int] | None, np.ndarray | None]:
    """(local_window_size, boolean mask) for the case's window, chunk, block-sparse, segment and
    per-head components; causal top-left and the lengths go in as is_causal and the seq lengths.
    A window at offset 0 goes in natively at q_len == kv_len, and at other lengths with `unequal`."""
    mask = case.mask
    window: Window | None = mask.window
    local = None
    if window is not None and window.offset == 0 and (unequal or case.q_len == case.kv_len):
        local, window = (_bound(window.left, case), _bound(window.right, case)), None
    rest = Mask(
        window=window, chunk=mask.chunk, block_sparse=mask.block_sparse, segments=mask.segments, heads=mask.heads
    )
    if not rest.components:
        return local, None
    dims = {"batch": case.batch, "heads": case.q_heads, "q_len": case.q_len, "kv_len": case.kv_len}
    return local, dense_mask(rest, **dims)


@functools.cache
def _takes_soft_cap(fn: Callable[..., Any], implementation: str) -> bool:
    """Whether `implementation` computes a soft-capped call (one tiny probe; tokamax raises
    NotImplementedError where a backend lacks the feature)."""
    default_flags()
    x = jnp.ones((1, 16, 1, 16), jnp.float32)
    try:
        fn(x, x, x, logits_soft_cap=1.0, implementation=implementation)
    except NotImplementedError:
        return False
    return True


# Lengths the window probe calls with, each way round, and a window that leaves every query row a key:
# a row with none would meet the empty-row convention instead of the window.
_PROBE_LENGTHS = ((4, 8), (8, 4))
_PROBE_WINDOW = (4, 1)


@functools.cache
def _takes_unequal_windows(fn: Callable[..., Any], implementation: str) -> bool:
    """Whether `implementation` computes local_window_size right at q_len != kv_len: two tiny calls against
    the same window as a boolean mask (tokamax 0.0.12 raised, or agreed by accident: the note's table)."""
    default_flags()
    before, after = _PROBE_WINDOW
    for q_len, kv_len in _PROBE_LENGTHS:
        q = jnp.linspace(-1.0, 1.0, q_len * 16, dtype=jnp.float32).reshape(1, q_len, 1, 16)
        k = jnp.linspace(1.0, -1.0, kv_len * 16, dtype=jnp.float32).reshape(1, kv_len, 1, 16)
        rows, cols = np.arange(q_len)[:, None], np.arange(kv_len)[None]
        visible = jnp.asarray((cols >= rows - before) & (cols <= rows + after))[None, None]
        try:
            got = fn(q, k, k, local_window_size=_PROBE_WINDOW, implementation=implementation)
            want = fn(q, k, k, None, visible, implementation=implementation)
        except Exception:  # noqa: BLE001 - any error (a broadcast, a slice, a type check) says: not natively
            return False
        if not np.allclose(got, want, atol=1e-6):
            return False
    return True
