"""Uninitialised scratch: the forward kernel never zeroes its output accumulator.

`acc_scratch_ref[batch_idx] = jnp.zeros(...)` at the start of each query tile's key sweep is
dropped, so the kernel reads scratch memory it never wrote: the interpreters' poison (NaN) on the
first tile, and the previous tile's sums after it. Both interpreters must fail it; which one saw what
is recorded per case (SubjectResult.interpreter and .shadow).
"""

from tests.planted._patch import patched_flash

_INIT = """    acc_scratch_ref[batch_idx] = jnp.zeros(
        acc_scratch_ref.shape[2:], jnp.float32
    )
"""
_module = patched_flash(__name__.rsplit(".", 1)[-1], [(_INIT, "    pass  # planted: acc is never initialised\n", None)])
flash_attention = _module.flash_attention
_flash_attention = _module._flash_attention
