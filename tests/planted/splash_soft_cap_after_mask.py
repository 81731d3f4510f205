"""Soft-cap bug in splash attention: the logits are masked first and capped after, so a masked
logit becomes tanh(mask_value / cap) * cap = -cap instead of the mask value, and every masked key
keeps a weight of exp(-cap - max) in the softmax. Harmless at a large cap on small logits; a cap
of a few units lets masked keys leak into every row.

One edit in `_apply_mask_and_soft_cap`, which the forward, dq and dkv kernels all call. Exposes
`make_splash`, the factory behind make_splash_mha / make_splash_mqa:
`--kernel pallas_splash=tests.planted.splash_soft_cap_after_mask:make_splash`.
"""

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
_OLD = "    qk = cap_logits(qk)\n    qk = jnp.where(mask, qk, mask_value)\n"
_NEW = "    qk = jnp.where(mask, qk, mask_value)\n    qk = cap_logits(qk)\n"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
make_splash = _module._make_splash_attention
