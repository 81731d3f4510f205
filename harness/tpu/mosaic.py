"""What a Pallas TPU kernel lowered to, read from the lowered program: the Mosaic kernel bodies.

A Pallas TPU kernel lowers to a `tpu_custom_call` whose backend config carries the Mosaic
module (serialized MLIR bytecode, base64) and the cost estimate the kernel declares
(`pl.CostEstimate`: flops, transcendentals, bytes accessed). The body's hash says whether a
library change altered the code the kernel generates, before anything is compiled or run;
jax's own tests/pallas/pallas_lowering_determinism_test.py asserts that it is the same across
re-lowerings. Its text (the bytecode parsed back, the dialects left unregistered) is kept
compressed beside the hash, for the report's diff of two bodies.

Stages are timed apart (trace, lower, compile): jax 0.10.1 made tracing and lowering 124%
slower for one user's kernels while compile time stayed (vllm-project/tpu-inference#2949).
Where the installed jax has no separate trace stage (`jax.jit(f).trace`), tracing is timed
together with lowering and the trace time is None.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import difflib
import gc
import hashlib
import json
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

STAGES: tuple[str, ...] = ("trace", "lower", "compile")
_CALL_TARGET = "tpu_custom_call"


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelBody:
    """One Mosaic kernel of a lowered program.

    sha256: of the serialized body (what the compiler receives, source locations included); size: its bytes;
    cost_estimate: the kernel's own declared estimate (None where it declares none);
    text_z: the body as text, zlib-compressed and base64-encoded (None where it cannot be parsed).
    """

    sha256: str
    size: int
    cost_estimate: dict[str, float] | None = None
    text_z: str | None = None

    @property
    def text(self) -> str | None:
        return None if self.text_z is None else zlib.decompress(base64.b64decode(self.text_z)).decode()

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KernelBody:
        return cls(**d)


def staged(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Any, Any, dict[str, float | None]]:
    """jit(fn) traced, lowered and compiled for `args`: (lowered, compiled, seconds per stage)."""
    import jax

    jitted = jax.jit(fn)
    times: dict[str, float | None] = dict.fromkeys(STAGES)
    with _no_collection():
        start = time.perf_counter()
        if hasattr(jitted, "trace"):  # jax >= 0.4.30: the trace stage apart
            traced = jitted.trace(*args)
            times["trace"] = time.perf_counter() - start
            start = time.perf_counter()
            lowered = traced.lower()
        else:  # pragma: no cover - older jax: tracing is inside lower()
            lowered = jitted.lower(*args)
        times["lower"] = time.perf_counter() - start
        start = time.perf_counter()
        compiled = lowered.compile()
        times["compile"] = time.perf_counter() - start
    return lowered, compiled, times


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """Python's cyclic garbage collector off while the stages are timed, as timeit does.

    A collection starts when the allocation count says, so it lands in the same job of every
    process of one library version and in another job under another version: measured, a default
    `upgrade --to jax==0.9.2` judged 3 stage timings slower and 3 faster at p=0.0079, and the
    baseline's trace of pallas_flash fwd causal_bf16_512 on v5p took 121 to 165 ms in all 5
    processes against 36 to 99 on the other generations; the one full collection of a probe's
    process landed in that job (265 ms)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _custom_calls(op: Any) -> Iterator[Any]:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if inner.operation.name == "stablehlo.custom_call":
                    yield inner
                yield from _custom_calls(inner.operation)


def _string(attr: Any) -> bytes:
    from jax._src.lib.mlir import ir

    s = ir.StringAttr(attr)
    return s.value_bytes if hasattr(s, "value_bytes") else s.value.encode()


def _as_text(body: bytes) -> str | None:
    """The serialized Mosaic module as MLIR text (its dialects unregistered), or None if it cannot be parsed."""
    try:
        from jax._src import tpu_custom_call
        from jax._src.lib.mlir import ir

        ctx = ir.Context()
        # The TPU dialect's attributes (memory spaces) must be known; the serialized ops need not be.
        tpu_custom_call.tpu.register_dialect(ctx)
        ctx.allow_unregistered_dialects = True
        with ctx, ir.Location.unknown(ctx):
            return str(ir.Module.parse(body))
    except Exception:  # noqa: BLE001 - a body this jax cannot parse back still has its hash
        return None


def kernel_bodies(lowered: Any) -> list[KernelBody]:
    """Every Mosaic kernel in a lowered program, in program order ([] for a program with none)."""
    module = lowered.compiler_ir("stablehlo")
    from jax._src.lib.mlir import ir

    out = []
    for call in _custom_calls(module.operation):
        attrs = call.attributes
        if "call_target_name" not in attrs or ir.StringAttr(attrs["call_target_name"]).value != _CALL_TARGET:
            continue
        config = json.loads(_string(attrs["backend_config"]))["custom_call_config"]
        body = base64.b64decode(config["body"])
        text = _as_text(body)
        out.append(
            KernelBody(
                sha256=hashlib.sha256(body).hexdigest(),
                size=len(body),
                cost_estimate=config.get("cost_estimate"),
                text_z=None if text is None else base64.b64encode(zlib.compress(text.encode(), 9)).decode(),
            )
        )
    return out


def digest(bodies: Sequence[KernelBody]) -> str | None:
    """One hash for a program's kernels (None for a program with none): equal digests, equal code.

    Of the bodies' text where every body has one, else of their serialized bytes. The bytes carry
    source locations, among them the absolute path of the installed jax, so the same code lowered in
    two virtualenvs (an upgrade's two sides, two matrix cells with the same jax) differs there: the
    matrix's two jax 0.10.2 cells, whose texts are identical, were listed as "code generation
    changed". The text holds no locations."""
    if not bodies:
        return None
    texts = [b.text for b in bodies]
    parts = [hashlib.sha256(t.encode()).hexdigest() for t in texts] if None not in texts else [b.sha256 for b in bodies]
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


# Lines of a body diff the report shows; the rest is counted, not printed.
DIFF_LINES = 120


def diff(before: Sequence[KernelBody], after: Sequence[KernelBody], *, lines: int = DIFF_LINES) -> str:
    """A unified diff of two programs' kernel bodies as text, cut to `lines` lines."""

    def text(bodies: Sequence[KernelBody]) -> list[str]:
        out = []
        for i, b in enumerate(bodies):
            out.append(f"// kernel {i}: sha256 {b.sha256[:16]}, {b.size} bytes")
            out += (b.text or "(body text not available)").splitlines()
        return out

    got = list(difflib.unified_diff(text(before), text(after), "before", "after", lineterm="", n=2))
    if len(got) > lines:
        got = [*got[:lines], f"... {len(got) - lines} more lines"]
    return "\n".join(got)
