"""Forward-pass mask bug in splash attention: the forward kernel evaluates the lazy mask
one key to the right, so a local window (and a causal or chunked mask) is off by one.

Only the in-kernel mask function is wrong: the block map is computed correctly from the
mask object, and the backward kernels are untouched. Exposes `make_splash`, the factory
behind make_splash_mha / make_splash_mqa, so the harness tests it with
`--kernel pallas_splash=tests.planted.splash_fwd_window_off_by_one:make_splash`.
"""

import importlib.util
import inspect
import sys

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as upstream

from tests.planted._patch import PatchError

_NAME = __name__.rsplit(".", 1)[-1]
# The forward kernel's key offset (one occurrence; the dq and dkv kernels spell theirs differently).
_OLD = "k_offset=global_kv_index * bkv + kv_compute_index * bkv_compute,"
_NEW = "k_offset=global_kv_index * bkv + kv_compute_index * bkv_compute + 1,"

_source = inspect.getsource(upstream)
if _source.count(_OLD) != 1:
    raise PatchError(f"{_NAME}: {_OLD!r} occurs {_source.count(_OLD)} times upstream; the edit needs exactly 1")
_spec = importlib.util.spec_from_loader(f"tests.planted._built_{_NAME}", loader=None)
_module = importlib.util.module_from_spec(_spec)
_module.__file__ = f"<planted {_NAME}>"
sys.modules[_spec.name] = _module
exec(compile(_source.replace(_OLD, _NEW), _module.__file__, "exec"), _module.__dict__)
make_splash = _module._make_splash_attention
