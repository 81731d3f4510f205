"""SPL-5: splash's sinks gradient (dsinks) summed in bfloat16 (fixed in jax 0.12.0).

Usage: python SPL-5.py [pallas_splash=MODULE:ATTR]   (ATTR: a make_splash_mha replacement; default:
the installed upstream's). Exit 1 while the kernel still sums dsinks in the low-precision dtype, 0
once it does not, 4 when it cannot run here. The probe of docs/history-runs.md#probes: one head,
a full 512 x 512 mask, bfloat16 q (scaled by 0.05), k, v and cotangent, sink logit 3.0; the kernel's
dsinks against the float64 sum of the same terms, from its own output and logsumexp.
"""

import importlib
import os
import sys

# Relative error of dsinks: the float32 sum is within 1e-6 of float64 (0.12.0), the bfloat16 one
# 3e-2 off (0.11.2), so a bound between them by two decades either side.
BOUND = 1e-4
EXIT_CANNOT_RUN = 4


def factory(spec):
    """make_splash_mha of the fork named `spec` (KERNEL=MODULE:ATTR or MODULE:ATTR), else upstream's."""
    target = spec.rpartition("=")[2]
    if ":" not in target:
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream

        return upstream.make_splash_mha
    module, _, attr = target.partition(":")
    sys.path.insert(0, os.getcwd())
    return getattr(importlib.import_module(module), attr)


def main(spec):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    try:
        make = factory(spec)
    except Exception as e:  # an import the installed jax cannot satisfy
        print(f"cannot run: {spec} does not load here: {type(e).__name__}: {e}")
        return EXIT_CANNOT_RUN
    length, head_dim = 512, 128
    mask = mask_lib.MultiHeadMask([mask_lib.FullMask((length, length))])
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v, do = (jax.random.normal(key, (1, length, head_dim), jnp.float32) for key in keys)
    q, k, v, do = (
        (q * 0.05).astype(jnp.bfloat16),
        k.astype(jnp.bfloat16),
        v.astype(jnp.bfloat16),
        do.astype(jnp.bfloat16),
    )
    sinks = jnp.array([3.0], jnp.float32)
    try:
        forward = make(mask, head_shards=1, q_seq_shards=1, save_residuals=True, interpret=True)
        backward = make(mask, head_shards=1, q_seq_shards=1, interpret=True)
        o, (lse,) = forward(q, k, v, sinks=sinks)
        _, vjp = jax.vjp(lambda s: backward(q, k, v, sinks=s), sinks)
        (dsinks,) = vjp(do)
    except TypeError as e:  # a release before the sinks (0.7.1)
        print(f"cannot run: {spec} takes no sinks: {e}")
        return EXIT_CANNOT_RUN
    o64, do64, lse64 = (np.asarray(x, np.float64) for x in (o, do, lse))
    truth = -np.sum(np.exp(3.0 - lse64)[..., None] * o64 * do64)
    error = abs(float(dsinks[0]) - truth) / abs(truth)
    print(f"dsinks {float(dsinks[0]):.7g}, float64 {truth:.7g}: relative error {error:.2g} (bound {BOUND:g})")
    return 1 if error > BOUND else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "pallas_splash"))
