"""Soft-cap bug in paged attention: the logits go through tanh without being divided by the cap.

`jnp.tanh(qk / attn_logits_soft_cap)` becomes `jnp.tanh(qk)`, so every logit is squashed into
(-cap, cap) at the wrong scale; cases without a soft cap are untouched. Exposes `paged_attention`
with the upstream signature (`--kernel pallas_paged=tests.planted.paged_soft_cap_unscaled:paged_attention`).
"""

from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
# One occurrence: the inline-sequence kernel body calls the same per-block kernel.
_OLD = "capped_qk = jnp.tanh(qk / attn_logits_soft_cap)"
_NEW = "capped_qk = jnp.tanh(qk)"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
paged_attention = _module.paged_attention
