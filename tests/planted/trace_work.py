"""Tracing cost regression: the upstream flash kernel behind a wrapper that traces an unrolled loop.

The values are the upstream kernel's, to the bit (each step adds 0.0), and so is the Mosaic
kernel body; only tracing (and lowering the extra elementwise ops, which XLA then folds away)
does several times the work. Planted for the gate's compile-time rows: a fork that unrolls a
Python loop per call, or re-derives its block sizes with jnp ops, regresses this way, and no
correctness check can see it (tests/test_gate_compile_time.py).
"""

from jax.experimental.pallas.ops.tpu import flash_attention as upstream

# Elementwise steps traced per call: the upstream forward traces in ~0.05-0.1 s here, these in ~1 s.
STEPS = 10_000


def flash_attention(q, k, v, ab=None, segment_ids=None, **kwargs):  # noqa: ANN001, ANN201 - the upstream signature
    for _ in range(STEPS):
        q = q + 0.0
    return upstream.flash_attention(q, k, v, ab, segment_ids, **kwargs)
