"""jax.nn.dot_product_attention as kernels under test: implementation="xla" everywhere,
"cudnn" only where JAX's default backend is a GPU (the module registers it only there).

The XLA path materialises the logits and masks them with a finite large negative
number; cuDNN runs a fused flash-attention kernel. Both take the BTNH layout
([batch, seq, heads, head_dim]) and grouped k/v heads natively.

Every mask goes in through the API's own parameter: `is_causal`, `local_window_size`,
`query_seq_lengths`, `key_value_seq_lengths`; segment ids as the boolean `mask`. Cases whose
blocks hold `mask_arg=1` take the other path the API offers for the same thing: causal, window
and lengths as a boolean `mask` the adapter builds from the positions (both are API).
`dropin(fn)` tests a function with the signature of jax.nn.dot_product_attention as this kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

from harness.core import coverage as cov
from harness.core import extended
from harness.core.case import DTYPES, FLOAT64, Case
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
from harness.core.jaxvjp import jax_outputs
from harness.core.masks import WINDOW_ALIGNED, Mask
from harness.runtime import compat, placement

# Present (value 1) in a case's blocks: causal, window and lengths go in as the boolean `mask`
# argument instead of their own parameters. Never changes the mathematics, as blocks never do.
MASK_ARG = "mask_arg"


# What the installed jax.nn.dot_product_attention takes, read from its signature, not its
# version: jax 0.4.31 added query_seq_lengths / key_value_seq_lengths, later local_window_size
# and return_residual; a matrix cell without one draws no case that needs it.
PARAMETERS = frozenset(cov.parameters(jax.nn.dot_product_attention))
NATIVE_COMPONENTS = frozenset(
    ({"window"} if "local_window_size" in PARAMETERS else set())
    | ({"q_lengths"} if "query_seq_lengths" in PARAMETERS else set())
    | ({"kv_lengths"} if "key_value_seq_lengths" in PARAMETERS else set())
)


def mask_argument(mask: Mask, *, batch: int, q_len: int, kv_len: int, segments: bool) -> jax.Array | None:
    """The case's causal, window and length (and, with `segments`, segment) masks as one boolean
    [batch, 1, q_len, kv_len] array built from positions, as a user of the `mask` argument would."""
    q_pos = jnp.arange(q_len)[:, None]
    k_pos = jnp.arange(kv_len)[None, :]
    out = jnp.ones((batch, 1, q_len, kv_len), bool)
    if mask.causal == "top_left":
        out &= k_pos <= q_pos
    if mask.window is not None:
        out &= (k_pos >= q_pos - mask.window.left) & (k_pos <= q_pos + mask.window.right)
    lengths = mask.lengths
    if lengths is not None and lengths.q is not None:
        out &= (jnp.arange(q_len)[None, :, None] < jnp.asarray(lengths.q)[:, None, None])[:, None]
    if lengths is not None and lengths.kv is not None:
        out &= (jnp.arange(kv_len)[None, None, :] < jnp.asarray(lengths.kv)[:, None, None])[:, None]
    if segments and mask.segments is not None:
        q_ids, kv_ids = jnp.asarray(mask.segments.ids("q")), jnp.asarray(mask.segments.ids("kv"))
        out &= (q_ids[:, :, None] == kv_ids[:, None, :])[:, None]
    return out


# jax.nn.dot_product_attention's own parameters for a mask component: (parameter, drawn, component).
NATIVE_PARAMETERS = (
    ("query_seq_lengths", "per-row valid query lengths, 0 to q_len", "q_lengths"),
    ("key_value_seq_lengths", "per-row valid key lengths, 0 to kv_len", "kv_lengths"),
    ("local_window_size", "(left, right), both bounded, at offset 0", "window"),
)


def _via_mask(case: Case) -> bool:
    return MASK_ARG in case.block_dict


def _native(case: Case, component: str) -> bool:
    """Whether the case gave `component` to its own parameter (not through the boolean mask)."""
    return component in case.mask.components and not _via_mask(case)


def api(implementation: Literal["xla", "cudnn"]) -> cov.Api:
    """Every parameter of jax.nn.dot_product_attention, as this adapter drives it."""
    segments = implementation == "xla"  # cuDNN is declared without segments
    return cov.Api(
        name="jax.nn.dot_product_attention",
        locate=lambda: jax.nn.dot_product_attention,
        params=(
            *cov.dot_product_arrays(),
            cov.Param(
                name="mask",
                drawn="boolean [B, 1, T, S]: segment ids, or (blocks mask_arg) causal, window and lengths too",
                exercised=lambda case: case.mask.segments is not None or _via_mask(case),
            )
            if segments
            else cov.Param(name="mask", why="cuDNN is declared without segment ids, the only boolean mask drawn"),
            cov.scale_param("scale"),
            cov.Param(
                name="is_causal",
                drawn="True, False",
                exercised=lambda case: cov.causal_top_left(case) and not _via_mask(case),
            ),
            *(
                cov.Param(name=name, drawn=drawn, exercised=lambda case, c=component: _native(case, c))
                if segments
                else cov.Param(name=name, why="cuDNN is declared without it (needs a GPU)")
                for name, drawn, component in NATIVE_PARAMETERS
            ),
            cov.Param(name="implementation", drawn=f'"{implementation}"', exercised=cov.always, why="one per kernel"),
            cov.Param(name="return_residual", drawn="True (a forward call of its own), False", exercised=cov.residuals),
        ),
    )


class DotProductAttention(Implementation):
    role = "kernel"
    framework = "jax"

    def __init__(
        self,
        implementation: Literal["xla", "cudnn"],
        name: str,
        capabilities: Capabilities,
        conventions: Conventions,
        about: About,
        fn: Callable[..., Any] | None = None,
    ) -> None:
        self.implementation = implementation
        self.name = name
        self.capabilities = capabilities
        self.conventions = conventions
        self.about = about
        self.api = (api(implementation),)
        self.fn = fn
        self.description = f'jax.nn.dot_product_attention(implementation="{implementation}")' + (
            "" if fn is None else f" drop-in {name}"
        )

    def backend(self) -> str:
        return compat.jax_platform()

    def block_strategy(self, case: Case) -> st.SearchStrategy[dict[str, int]] | None:
        if self.implementation != "xla":
            return None
        # Both paths for the same mask: its own parameters (no blocks) or the boolean mask argument.
        return st.sampled_from(({}, {MASK_ARG: 1}))

    def padded_rows(self, case: Case) -> EmptyRows:
        # Through query_seq_lengths the output of padded query rows is multiplied by 0
        # (_dot_product_attention_core); through the mask argument they are rows with no visible key.
        return "uniform" if MASK_ARG in case.block_dict else "zeros"

    def empty_row_fill(self, case: Case) -> str | None:
        # _apply_masks: jnp.where(combined_mask, logits, large_negative_number); cuDNN's is not measured here.
        return "replaced" if self.implementation == "xla" else None

    def mask_forms(self, case: Case) -> dict[str, Case]:
        if self.implementation != "xla":
            return {"": case}
        plain = tuple((k, v) for k, v in case.blocks if k != MASK_ARG)
        return {"parameters": case.replace(blocks=plain), "mask argument": case.replace(blocks=(*plain, (MASK_ARG, 1)))}

    def violations(self, case: Case) -> list[str]:
        out = super().violations(case)
        for m in (case.mask, *(case.mask.heads or ())):
            w = m.window
            if w is not None and (w.offset != 0 or w.left is None or w.right is None):
                out.append(f"{w!r}: local_window_size=(left, right) needs offset 0 and both sides bounded")
        if set(case.block_dict) - {MASK_ARG} or case.block_dict.get(MASK_ARG, 1) != 1:
            out.append(f"blocks={case.block_dict} may only hold {MASK_ARG}=1 (the boolean mask path)")
        return out

    def _call(self, case: Case, *, residual: bool) -> Callable[..., Any]:
        """f(q, k, v[, bias]) in the SDPA layout: the output, or with `residual` the logsumexp [B, Hq, Lq]."""
        m = case.mask
        via_mask = MASK_ARG in case.block_dict
        kw: dict[str, Any] = {"scale": case.sm_scale, "implementation": self.implementation}
        if via_mask:
            kw["mask"] = mask_argument(m, batch=case.batch, q_len=case.q_len, kv_len=case.kv_len, segments=True)
        else:
            kw["is_causal"] = m.causal == "top_left"
            if m.segments is not None:
                # Segment ids have no parameter of their own: the boolean mask is their API.
                kw["mask"] = mask_argument(
                    Mask(segments=m.segments), batch=case.batch, q_len=case.q_len, kv_len=case.kv_len, segments=True
                )
            if m.window is not None:
                kw["local_window_size"] = (m.window.left, m.window.right)
            if m.lengths is not None and m.lengths.q is not None:
                kw["query_seq_lengths"] = jnp.asarray(m.lengths.q, jnp.int32)
            if m.lengths is not None and m.lengths.kv is not None:
                kw["key_value_seq_lengths"] = jnp.asarray(m.lengths.kv, jnp.int32)
        if residual:
            kw["return_residual"] = True
        fn = self.fn or jax.nn.dot_product_attention

        def f(q, k, v, *bias):
            q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))  # BNTH -> BTNH
            got = fn(q, k, v, bias[0] if bias else None, **kw)
            # The residual is [B, T, N]; the output [B, T, N, H].
            return jnp.swapaxes(got[1], 1, 2) if residual else jnp.swapaxes(got, 1, 2)

        return f

    def jax_fn(self, case: Case) -> Callable[..., Any]:
        return self._call(case, residual=False)

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        # float64 only around the call (harness.runtime.compat.enable_x64); every other dtype without it.
        wide = compat.enable_x64() if case.dtype == FLOAT64 else contextlib.nullcontext()
        device = placement.kernel_device()
        with wide:
            got = jax_outputs(self._call(case, residual=False), inputs, grads=grads, device=device)
            if case.residuals:
                # A separate forward call: return_residual's output is not meant to be differentiated.
                lse = jax_outputs(self._call(case, residual=True), inputs, grads=False, device=device)
                got = dataclasses.replace(got, lse=lse.out)
        return got


FLOAT64_FINDING = "docs/findings/jax_xla_float64_softmax_in_float32.md"


def float64_softmax_in_float32() -> bool:
    """Whether the installed jax.nn.dot_product_attention computes a float64 softmax in float32
    (FLOAT64_FINDING), probed on one tiny case against the same softmax written in float64.

    jax_xla draws float64 all the same where the API takes it (XLA_FLOAT64): its float64 cases fail there,
    one bug by its trigger (float64 inputs), reported by the finding's name (harness.running.known), and
    expected with `run --known jax_xla_float64_softmax_in_float32`; tests/test_xla_attention.py keeps the
    divergence itself visible.
    """
    with compat.enable_x64():
        x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 8, 1, 16)), jnp.float64)
        got = jax.nn.dot_product_attention(x, x, x, implementation="xla")
        want = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", x, x) / 4.0, axis=-1)
        want = jnp.einsum("bhqk,bkhd->bqhd", want, x)
        return bool(jnp.max(jnp.abs(got - want)) > 1e-12)


def takes_float64() -> bool:
    """Whether the installed jax.nn.dot_product_attention takes float64 inputs (one tiny call under x64):
    a release that raises for them has float64 outside its API."""
    with compat.enable_x64():
        x = jnp.zeros((1, 8, 1, 16), jnp.float64)
        try:
            jax.block_until_ready(jax.nn.dot_product_attention(x, x, x, implementation="xla"))
        except Exception:  # noqa: BLE001 - the library's refusal is the answer
            return False
    return True


# float64 where a truth more precise than float64 exists (harness.core.extended) and the API takes it,
# whether or not the release computes it right: what it does with float64 is the finding's to say.
XLA_FLOAT64 = extended.EXTENDED is not None and takes_float64()
XLA_CAPABILITIES = Capabilities(
    dtypes=DTYPES + ((FLOAT64,) if XLA_FLOAT64 else ()),
    head_dims=(64, 32, 80, 128, 256),
    # No tiles: lengths that are no multiple of anything, too.
    seq_lens=(16, 100, 128, 256),
    # is_causal is top-left (a tril mask); local_window_size=(left, right) has no offset and
    # no unbounded side (WINDOW_ALIGNED); the valid lengths have no start index (kv_starts).
    mask_components=frozenset({"causal_top_left", "segments", "bias"}) | NATIVE_COMPONENTS,
    restrictions=frozenset({WINDOW_ALIGNED}),
    max_group=4,
    residuals="return_residual" in PARAMETERS,
)
XLA_CONVENTIONS = Conventions(
    bias="QK^T * scale + bias (logits in float32 for 16-bit inputs)",
    causal="top-left (is_causal builds tril(ones(T, S)))",
    gqa="native: key heads may divide query heads",
    empty_rows="uniform",
    # one compiled XLA program per case; XLA on CPU has no atomics
    reproducible=True,
    batch_invariant=True,
    notes=(
        "masked logits become a finite large negative number, so a row with no visible key averages all values; "
        "query rows past query_seq_lengths are set to 0; return_residual's logsumexp is rounded to the input dtype"
    ),
)
SOURCE = "jax/_src/nn/functions.py: jax.nn.dot_product_attention"
_CUDNN = "jax/_src/cudnn/fused_attention_stablehlo.py"
# Every restriction the xla adapter applies, with its source (harness.core.contract.Restriction).
_WINDOW = dict(upstream="jax/_src/nn/functions.py", check="left_window, right_window = local_window_size")
XLA_RESTRICTIONS = (
    Restriction(on="head_dims", rule="the values drawn", choice="the xla path takes any head_dim"),
    Restriction(on="mask_components", rule="its parameters, read from its signature", probe="NATIVE_COMPONENTS"),
    Restriction(on="restrictions:window_aligned", rule="windows at offset 0, both sides bounded", **_WINDOW),
    Restriction(on="dtypes", rule="float64 where the API takes it and a wider truth exists", probe="XLA_FLOAT64"),
    Restriction(on="violations", rule="local_window_size at offset 0, both sides bounded", **_WINDOW),
    Restriction(on="violations", rule="blocks hold only mask_arg", choice="mask_arg is the adapter's own flag"),
)
XLA_ABOUT = About(
    summary='jax.nn.dot_product_attention(implementation="xla")',
    source=SOURCE,
    cases=12,  # 11 smoke with the extreme regimes; 0.5-3.0 CPU s a case (benchmarks/results/matrix_budget.json)
    blocks="mask_arg (the boolean `mask` path instead of the parameters)",
    notes="float64 where the API takes it (jax 0.10.2 gets it wrong: a known finding); padded query rows are zeros",
    restrictions=XLA_RESTRICTIONS,
)
XLA = DotProductAttention("xla", "jax_xla", XLA_CAPABILITIES, XLA_CONVENTIONS, XLA_ABOUT)
register(XLA)

CUDNN = DotProductAttention(
    "cudnn",
    "jax_cudnn",
    Capabilities(
        # cuDNN's fused attention takes 16-bit inputs and head dims up to 128 (multiples of 8).
        dtypes=("bfloat16", "float16"),
        head_dims=(64, 128),
        seq_lens=(64, 128, 256),
        mask_components=frozenset({"causal_top_left", "bias"}),
        dbias=False,
        # The API's return_residual reaches cuDNN's own softmax statistics (jax transposes them to
        # the xla path's [B, T, N] and rounds them to the output dtype): declared drawn, so drawn.
        residuals="return_residual" in PARAMETERS,
    ),
    Conventions(
        bias="QK^T * scale + bias",
        causal="top-left",
        gqa="native",
        empty_rows="uniform",
        # cuDNN's fused backward may accumulate dQ with atomics (its frontend's deterministic
        # algorithm is opt-in); GPU only, never run here
        reproducible="not declared: cuDNN's backward may sum dQ with atomics (deterministic mode is opt-in)",
        batch_invariant=True,
        notes="declared masks leave no row without a visible key, so the empty-row value is never checked",
    ),
    About(
        summary='jax.nn.dot_product_attention(implementation="cudnn")',
        source=SOURCE,
        cases=8,  # natively on a GPU: milliseconds a case
        needs="gpu",
        notes="capabilities from reading upstream, not from a run here",
        restrictions=(
            Restriction(on="dtypes", rule="16-bit only", upstream=_CUDNN, check="Q must be fp16/bf16/fp8_e4m3fn"),
            Restriction(on="head_dims", rule="multiples of 8 up to 128", upstream=_CUDNN, check="qH % 8 == 0"),
            Restriction(on="mask_components", rule="causal and bias", choice="the subset read upstream; not run here"),
            # This release's should_export_dbias returns True: dbias is left undrawn, not refused.
            Restriction(on="dbias", rule="dbias not checked", choice="not run here (no GPU on these hosts)"),
            *XLA_RESTRICTIONS[-3:],  # the same violations()
        ),
    ),
)


def dropin(fn: Callable[..., Any], *, name: str) -> DotProductAttention:
    """Test `fn`, a function with the signature of jax.nn.dot_product_attention, as jax_xla."""
    return DotProductAttention("xla", name, XLA_CAPABILITIES, XLA_CONVENTIONS, XLA_ABOUT, fn=fn)


register(CUDNN, here=compat.jax_platform() == "gpu")
