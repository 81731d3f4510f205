"""Forward-pass mask bug in splash attention: the forward kernel evaluates the lazy mask
one key to the right, so a local window (and a causal or chunked mask) is off by one.

Only the in-kernel mask function is wrong: the block map is computed correctly from the
mask object, and the backward kernels are untouched. Exposes `make_splash`, the factory
behind make_splash_mha / make_splash_mqa, so the harness tests it with
`--kernel pallas_splash=tests.planted.splash_fwd_window_off_by_one:make_splash`.
"""

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream

from tests.planted._patch import patched

_NAME = __name__.rsplit(".", 1)[-1]
# The forward kernel's key offset (one occurrence; the dq and dkv kernels spell theirs differently).
_OLD = "k_offset=global_kv_index * bkv + kv_compute_index * bkv_compute,"
_NEW = "k_offset=global_kv_index * bkv + kv_compute_index * bkv_compute + 1,"

_module = patched(upstream, _NAME, [(_OLD, _NEW, None)])
make_splash = _module._make_splash_attention
