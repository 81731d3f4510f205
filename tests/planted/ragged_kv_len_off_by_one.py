"""Ragged-length bug in ragged paged attention: the causal diagonal of each sequence is one key late.

The row position of the kernel's causal mask starts at `kv_len - q_len + 1` instead of
`kv_len - q_len`, so every query also sees the key just after it (and a decode query a key
past the sequence's length). Exposes `ragged_paged_attention` with the upstream signature:
`--kernel pallas_ragged_paged=tests.planted.ragged_kv_len_off_by_one:ragged_paged_attention`.
"""

import importlib.util
import inspect
import sys

from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as upstream

from tests.planted._patch import PatchError

_NAME = __name__.rsplit(".", 1)[-1]
# The kernel body's causal row offset (upstream's reference spells its own differently).
_OLD = "          (kv_len - q_len)\n          + q_len_start"
_NEW = "          (kv_len - q_len + 1)\n          + q_len_start"

_source = inspect.getsource(upstream)
if _source.count(_OLD) != 1:
    raise PatchError(f"{_NAME}: {_OLD!r} occurs {_source.count(_OLD)} times upstream; the edit needs exactly 1")
_spec = importlib.util.spec_from_loader(f"tests.planted._built_{_NAME}", loader=None)
_module = importlib.util.module_from_spec(_spec)
_module.__file__ = f"<planted {_NAME}>"
sys.modules[_spec.name] = _module
exec(compile(_source.replace(_OLD, _NEW), _module.__file__, "exec"), _module.__dict__)
ragged_paged_attention = _module.ragged_paged_attention
