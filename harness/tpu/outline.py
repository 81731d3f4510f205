"""The outline of a compiled program (harness.store.outline), read from its optimized HLO.

The entry computation of `compiled.as_text()` is read instruction by instruction: a
`tpu_custom_call` is a kernel call, every other instruction that moves data an op around it.
Instructions that move nothing (parameters, constants, tuples and their elements, bitcasts,
the second half of an async copy) are left out. Computations called from the entry (fusion
bodies) are not read apart: a fusion counts once, by its operands and result. The Mosaic
kernel's name is read from the lowering (the custom call's `kernel_name` attribute), and
matched to the compiled call by the hash of the kernel body both carry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from harness.store.outline import KernelCall, Op, Outline

_KERNEL_TARGET = "tpu_custom_call"
# Element sizes in bytes; sub-byte types round up to a byte.
_DTYPE_BYTES = {
    "pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8,
    "bf16": 2, "f16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16,
}  # fmt: skip
# ... and every async "-done", which completes what its "-start" moved.
_MOVES_NOTHING = frozenset(
    {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "opt-barrier", "after-all"}
)
_SLICES = frozenset({"slice", "dynamic-slice", "slice-start"})
_ARRAY = re.compile(r"(\w+)\[([\d,]*)\](?:\{([^}]*)\})?")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*(?P<rest>.*)$", re.DOTALL)


def _balanced(text: str, start: int) -> int:
    """The index just past the parenthesis that closes the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise ValueError(f"unbalanced parentheses in {text[start : start + 80]!r}")


def _arrays(shape: str) -> list[tuple[str, int, str, int]]:
    """(dtype, bytes, layout without memory space, rank) of each array in a shape (a tuple has several)."""
    out = []
    for dtype, dims, layout in _ARRAY.findall(shape):
        if dtype not in _DTYPE_BYTES:
            continue  # a token (u32[] context of an async copy is an array, token[] is not)
        n, sizes = 1, [int(d) for d in dims.split(",") if d]
        for d in sizes:
            n *= d
        out.append((dtype, n * _DTYPE_BYTES[dtype], re.sub(r"S\(\d+\)", "", layout or ""), len(sizes)))
    return out


def _nbytes(shape: str) -> int:
    return sum(b for _, b, _, _ in _arrays(shape))


def _parse(line: str) -> dict[str, Any] | None:
    m = _INSTRUCTION.match(line)
    if m is None:
        return None
    rest = m["rest"]
    end = _balanced(rest, 0) if rest.startswith("(") else rest.index(" ")
    shape, tail = rest[:end], rest[end:].lstrip()
    op = re.match(r"([\w\-]+)\(", tail)
    if op is None:
        return None
    close = _balanced(tail, op.end() - 1)
    attrs = tail[close:]
    target = re.search(r'custom_call_target="([^"]+)"', attrs)
    kind = re.search(r"\bkind=(k\w+)", attrs)
    op_name = re.search(r'op_name="([^"]*)"', attrs)
    body = re.search(r'"body":"([^"]*)"', attrs)
    return {
        "name": m["name"],
        "shape": shape,
        "opcode": op[1],
        "operands": re.findall(r"%([^\s,)]+)", tail[op.end() : close - 1]),
        "target": target[1] if target else None,
        "fusion_kind": kind[1] if kind else None,
        "op_name": op_name[1] if op_name else "",
        "body_sha256": hashlib.sha256(base64.b64decode(body[1])).hexdigest() if body else None,
    }


def entry_lines(hlo_text: str) -> list[str]:
    """The instructions of the entry computation, one string each (a backend config can span lines)."""
    lines = hlo_text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("ENTRY ")), None)
    if start is None:
        raise ValueError("no ENTRY computation in the HLO text")
    out: list[str] = []
    for ln in lines[start + 1 :]:
        if ln == "}":
            break
        if _INSTRUCTION.match(ln) or not out:
            out.append(ln)
        else:
            out[-1] += "\n" + ln
    return out


def from_hlo_text(hlo_text: str, kernel_names: dict[str, str] | None = None) -> Outline:
    """The outline of an optimized HLO module's text; `kernel_names`: kernel body sha256 -> Mosaic name."""
    names = kernel_names or {}
    shapes: dict[str, str] = {}
    kernels: list[KernelCall] = []
    ops: list[Op] = []
    for line in entry_lines(hlo_text):
        ins = _parse(line)
        if ins is None:
            continue
        shapes[ins["name"]] = ins["shape"]
        operand_shapes = [shapes.get(o, "") for o in ins["operands"]]
        read = sum(_nbytes(s) for s in operand_shapes)
        written = _nbytes(ins["shape"])
        if ins["opcode"] == "custom-call" and ins["target"] == _KERNEL_TARGET:
            kernels.append(
                KernelCall(
                    name=ins["name"],
                    kernel_name=names.get(ins["body_sha256"] or ""),
                    op_name=ins["op_name"],
                    bytes_read=read,
                    bytes_written=written,
                )
            )
            continue
        if ins["opcode"] in _MOVES_NOTHING or ins["opcode"].endswith("-done"):
            continue
        if ins["opcode"].endswith("-start"):
            # An async op's result holds its operands and scalar context beside what it writes
            # (copy-start: (destination, source, u32[])); what it writes is the rest.
            written = max(0, sum(b for _, b, _, rank in _arrays(ins["shape"]) if rank) - read)
        if ins["opcode"] in _SLICES:  # reads only the part it writes
            read = written
        kind = ins["opcode"]
        if kind == "fusion":
            kind = f"fusion:{ins['fusion_kind']}"
        elif kind == "custom-call":
            kind = f"custom-call:{ins['target']}"
        ops.append(
            Op(
                name=ins["name"],
                kind=kind,
                shape=re.sub(r"\s+", " ", ins["shape"]),
                bytes_read=read,
                bytes_written=written,
                relayout=_relayout(ins["opcode"], operand_shapes, ins["shape"]),
                op_name=ins["op_name"],
            )
        )
    return Outline(kernels=tuple(kernels), ops=tuple(ops))


def _relayout(opcode: str, operand_shapes: list[str], shape: str) -> bool:
    """A transpose, or a copy whose result's layout (memory space aside) differs from its operand's."""
    if opcode == "transpose":
        return True
    if opcode not in ("copy", "copy-start") or not operand_shapes:
        return False
    src, dst = _arrays(operand_shapes[0]), _arrays(shape)
    return bool(src and dst) and src[0][2] != dst[0][2]


def kernel_names(lowered: Any) -> dict[str, str]:
    """Kernel body sha256 -> the Mosaic kernel's name, for every named kernel in a lowered program."""
    from jax._src.lib.mlir import ir

    from harness.tpu import mosaic

    out = {}
    for call in mosaic._custom_calls(lowered.compiler_ir("stablehlo").operation):
        attrs = call.attributes
        if "kernel_name" not in attrs or "backend_config" not in attrs:
            continue
        config = json.loads(mosaic._string(attrs["backend_config"])).get("custom_call_config", {})
        if "body" in config:
            sha = hashlib.sha256(base64.b64decode(config["body"])).hexdigest()
            out[sha] = ir.StringAttr(attrs["kernel_name"]).value
    return out


def outline(lowered: Any, compiled: Any) -> Outline:
    """The outline of a program compiled from `lowered`."""
    return from_hlo_text(compiled.as_text(), kernel_names(lowered))
