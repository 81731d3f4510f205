"""The program outline of one compile: the kernel's custom calls and every op around them.

A profiler lists a compiled program by its instructions: a Pallas TPU kernel is one custom call,
named after the innermost scope it was called in (`jit(flash_attention)` -> `flash_attention.1`),
whose Mosaic kernel carries the kernel function's name (`_flash_attention_kernel`). What XLA puts
around the call (a layout-changing copy of an operand, a transpose, an input fusion) moves whole
tensors that no kernel benchmark times. The outline records both, so that a gate can say that a
fork or an upgrade added a copy of k around the kernel, or that the kernel now shows up anonymous.

Bytes are logical (elements times element size), without the tile padding of a TPU layout.
Built by harness.tpu.outline from the optimized HLO; stored in a CompileRecord's "outline".
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from harness.store.schema import RecordError

# Names that say nothing about which kernel ran: a lambda or a bare `kernel` function given to
# pallas_call (Mosaic's kernel name), or a call with no scope of its own (the instruction name).
GENERIC_NAMES = frozenset({"", "_lambda_", "lambda", "kernel", "pallas_call", "tpu_custom_call", "custom-call"})


def base_name(name: str) -> str:
    """An instruction name without XLA's uniquifying suffix: `flash_attention.1` -> `flash_attention`."""
    return re.sub(r"\.\d+$", "", name)


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelCall:
    """One kernel custom call: the names a profiler shows for it, and the bytes it reads and writes."""

    name: str  # the instruction name in the optimized program (a profiler's op name)
    kernel_name: str | None  # the Mosaic kernel's name; None where the lowering did not say
    op_name: str = ""  # the scope path it was called under (the instruction's metadata)
    bytes_read: int = 0
    bytes_written: int = 0

    @property
    def anonymous(self) -> bool:
        """A profiler would show it without a name of its own (a kernel name not read says nothing either way)."""
        return base_name(self.name) in GENERIC_NAMES or (
            self.kernel_name is not None and self.kernel_name in GENERIC_NAMES
        )

    @property
    def label(self) -> str:
        return f"{base_name(self.name)} ({self.kernel_name or 'no kernel name'})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Op:
    """One instruction outside the kernels that moves data."""

    name: str
    kind: str  # the opcode; a fusion as "fusion:kLoop", another custom call as "custom-call:TARGET"
    shape: str  # its result shape, layout included
    bytes_read: int
    bytes_written: int
    relayout: bool = False  # a copy or transpose whose result is laid out otherwise than its operand
    op_name: str = ""

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclasses.dataclass(frozen=True, kw_only=True)
class KindTotal:
    """The ops of one kind in a program, summed."""

    kind: str
    count: int
    bytes: int
    relayouts: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outline:
    """The optimized program of one compile, outlined: its kernel calls and the ops around them."""

    kernels: tuple[KernelCall, ...] = ()
    ops: tuple[Op, ...] = ()

    @property
    def kernel_bytes(self) -> int:
        return sum(k.bytes_read + k.bytes_written for k in self.kernels)

    @property
    def outside_bytes(self) -> int:
        return sum(op.bytes for op in self.ops)

    @property
    def outside_share(self) -> float:
        """The share of the program's bytes moved outside the kernels (0 for a program moving none)."""
        total = self.kernel_bytes + self.outside_bytes
        return self.outside_bytes / total if total else 0.0

    def by_kind(self) -> dict[str, KindTotal]:
        out: dict[str, KindTotal] = {}
        for op in self.ops:
            t = out.get(op.kind, KindTotal(kind=op.kind, count=0, bytes=0, relayouts=0))
            out[op.kind] = KindTotal(
                kind=op.kind, count=t.count + 1, bytes=t.bytes + op.bytes, relayouts=t.relayouts + op.relayout
            )
        return dict(sorted(out.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "kernels": [dataclasses.asdict(k) for k in self.kernels],
            "ops": [dataclasses.asdict(op) for op in self.ops],
        }

    @classmethod
    def from_json(cls, doc: Any, where: str = "outline") -> Outline:
        """The outline `doc` holds; RecordError (one line) where it is not one."""
        try:
            return cls(
                kernels=tuple(KernelCall(**k) for k in doc.get("kernels", [])),
                ops=tuple(Op(**op) for op in doc.get("ops", [])),
            )
        except (AttributeError, TypeError) as e:
            raise RecordError(f"{where}: outline does not read: {e}") from None
