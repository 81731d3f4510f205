"""Sinks-gradient bug in splash attention: the backward returns +p_sink * di for each sink where
the gradient is -p_sink * di (a sink adds to every row's denominator and carries no value, so
raising it moves weight off the keys: d out / d sink = -p_sink * out). The slip of taking d lse
/ d sink = +p_sink for the gradient of the output.

One edit in `_splash_attention_bwd`, after the dq and dkv kernels: the output, the logsumexp and
dq, dk, dv are untouched, so only a comparison of dsinks sees it. Exposes `make_splash`, the
factory behind make_splash_mha / make_splash_mqa:
`--kernel pallas_splash=tests.planted.splash_dsinks_sign:make_splash`.
"""

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
# The kernel's own dsinks sum, whose sinks_exp carries the minus sign (jax 0.12.1: `sinks_exp = -jnp.exp(...)`);
# the test-only reference in the same module sums the same product without the `axis` argument.
_OLD = "        sinks_exp * o.astype(jnp.float32) * do.astype(jnp.float32),\n        axis=(-1, -2),\n"
_NEW = "        -sinks_exp * o.astype(jnp.float32) * do.astype(jnp.float32),\n        axis=(-1, -2),\n"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
make_splash = _module._make_splash_attention
