"""Fix for docs/findings/pallas_splash_backward_nan_larger_dkv_tile.md, as source edits of upstream splash.

A query row whose forward tile visited no key tile has logsumexp = -inf (and output 0/0); the dq and
dkv kernels then compute p = exp(qk - (-inf)) = inf and di = sum(o * do) = NaN for it, and inf * 0 or
NaN * 0 spreads over the key tile. The fix: such a row has p = 0 and di = 0 in both kernels (it sees
no key, so it adds nothing to any gradient). Two edits, each at its two occurrences (dq kernel, dkv
kernel); the forward and its residuals are untouched.

`--kernel pallas_splash=docs.findings.fixes.splash_backward_nan:make_splash`.
"""

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream

from tests.planted._patch import patched

_NAME = "splash_backward_nan_fix"
EDITS = [
    (
        "p = jnp.exp(qk - logsumexp)",
        "p = jnp.where(logsumexp == -jnp.inf, 0.0, jnp.exp(qk - logsumexp))",
        [0, 1],
    ),
    # Occurrence 0 is the module's pure-JAX reference backward, which is right as it is.
    ("ds = (dp - di) * p", "ds = (dp - jnp.where(logsumexp == -jnp.inf, 0.0, di)) * p", [1, 2]),
]

_module = patched(upstream, _NAME, EDITS)
make_splash = _module._make_splash_attention
