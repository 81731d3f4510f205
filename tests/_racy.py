"""A Pallas TPU kernel with a data race, for the race checks (tests/test_races.py, tests/test_runner.py)."""

from __future__ import annotations

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _racy_kernel(x_hbm, o_ref, buf, sem):
    # Reads its DMA destination before waiting for the copy: a data race.
    copy = pltpu.make_async_copy(x_hbm, buf, sem)
    copy.start()
    o_ref[...] = buf[...]
    copy.wait()


def racy(x: jax.Array) -> jax.Array:
    """x copied through VMEM by a kernel that reads the copy before it lands."""
    return pl.pallas_call(
        _racy_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA],
    )(x)
