"""A batch row of a case on its own: the case and inputs the batch check (harness.running.batch) runs
alone, in the run's process or in the kernel's worker (harness.running.worker), which both cut it here."""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.core.case import Case
from harness.core.inputs import Inputs
from harness.core.masks import Lengths, Mask, Segments


def row_mask(mask: Mask, b: int) -> Mask:
    """The mask of batch row b alone (the per-row parts cut to that row)."""
    s, n = mask.segments, mask.lengths
    pick = lambda t: None if t is None else (t[b],)  # noqa: E731
    return dataclasses.replace(
        mask,
        segments=None if s is None else Segments(q=(s.q[b],), kv=(s.kv[b],)),
        lengths=None if n is None else Lengths(q=pick(n.q), kv=pick(n.kv), kv_starts=pick(n.kv_starts)),
        heads=None if mask.heads is None else tuple(row_mask(m, b) for m in mask.heads),
    )


def row_inputs(inputs: Inputs, b: int) -> Inputs:
    """The arrays of batch row b (every per-row array cut to [b:b + 1]; the per-head sinks kept)."""
    cut = {
        f.name: getattr(inputs, f.name)[b : b + 1].copy()
        for f in dataclasses.fields(inputs)
        if f.name != "sinks" and isinstance(getattr(inputs, f.name), np.ndarray)
    }
    return dataclasses.replace(inputs, **cut)


def batch_row(case: Case, inputs: Inputs, b: int) -> tuple[Case, Inputs]:
    """Batch row b of `case` and its `inputs` as a case of its own: what the row-alone run computes."""
    return case.replace(batch=1, mask=row_mask(case.mask, b)), row_inputs(inputs, b)
