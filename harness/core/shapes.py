"""The fixed benchmark shapes: the one list that compile checks and speed benchmarks share.

Each is a named Case. Shapes are fixed rather than drawn so that compiled memory, cost and
timings are comparable from one commit, machine and library version to the next. Renaming
or changing a shape starts a new series: add a shape rather than editing one.
"""

from __future__ import annotations

import dataclasses

from harness.core.case import Case
from harness.core.errors import InputError
from harness.core.masks import Mask


class ShapeError(InputError):
    """An unknown shape name; the message lists the known ones."""


@dataclasses.dataclass(frozen=True)
class BenchShape:
    """A named benchmark case.

    on_cpu: whether speed benchmarks time it where there is no accelerator (the Pallas TPU
    interpreter, the CPU oracles). The interpreter takes seconds per grid step at long
    sequences and a dense CPU oracle needs memory quadratic in length, so only small shapes
    are timed there; every shape is timed natively and compiled for every topology.
    """

    name: str
    case: Case
    on_cpu: bool = False


_CAUSAL = Mask(causal="top_left")

SHAPES: dict[str, BenchShape] = {
    s.name: s
    for s in (
        BenchShape(
            "mha_f32_256",
            Case(batch=1, q_heads=2, kv_heads=2, q_len=256, kv_len=256, head_dim=128, dtype="float32"),
            on_cpu=True,
        ),
        BenchShape(
            "causal_bf16_512",
            Case(batch=1, q_heads=4, kv_heads=4, q_len=512, kv_len=512, head_dim=128, dtype="bfloat16", mask=_CAUSAL),
            on_cpu=True,
        ),
        BenchShape(
            "gqa_causal_bf16_2048",
            Case(batch=2, q_heads=8, kv_heads=2, q_len=2048, kv_len=2048, head_dim=128, dtype="bfloat16", mask=_CAUSAL),
        ),
        BenchShape(
            "long_causal_bf16_8192",
            Case(batch=1, q_heads=8, kv_heads=8, q_len=8192, kv_len=8192, head_dim=128, dtype="bfloat16", mask=_CAUSAL),
        ),
    )
}
PASSES: tuple[str, ...] = ("fwd", "fwd_bwd")


def get(names: list[str] | None = None) -> list[BenchShape]:
    """The named shapes (all when None); an unknown name raises ShapeError listing the known ones."""
    if not names:
        return list(SHAPES.values())
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise ShapeError(f"unknown shape(s) {unknown}; known: {sorted(SHAPES)}")
    return [SHAPES[n] for n in names]
