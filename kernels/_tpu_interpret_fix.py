"""Reads through a reshaped, bitcast or transposed ref under the Pallas TPU interpret mode: the fix, as exact
source edits of the installed interpreter.

The TPU interpret mode (the "faithful" interpreter) turns a ref's transforms into one range of its buffer
(`interpret_utils.to_range`: "For now, assume only NDIndexer transforms."), so a read of `ref.reshape(...)`
raises `AttributeError: 'ReshapeTransform' object has no attribute 'indices'`, and ragged_paged_attention,
which reads its K/V pages so, cannot run (docs/findings/pallas_ragged_paged_interpreter.md). The fix, written
as upstream would take it: `get` reads the range of the indexers before the first other transform, then
applies the rest (a reshape, a bitcast as a TPU ref bitcasts, a transpose, and indexers after them, bounds-
checked as the buffer read is) to the value read. A write or a DMA through such a ref still fails, now with a
NotImplementedError naming the transform instead of an AttributeError.

The edits replace functions in the interpreter's own modules (exec'd in their namespaces): pallas_call
dispatches to the installed modules, so a patched copy (tests/planted/_patch.py) would never be called. They
are applied only where PROBES fail on the installed interpreter (`ensure`), once per process, and every
result computed under them says so (`STATUS_NOTE`, in the adapters' conventions). With SWITCH=off in the
environment they are never applied: the kernels that need them are then "cannot run here", their reason naming
the switch (the unfixed side of the fix's proof, `nox -s findings`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import inspect
import logging
import os
import textwrap
import threading
import types
from collections.abc import Callable
from typing import Any

UTILS = "jax._src.pallas.mosaic.interpret.utils"
CALL = "jax._src.pallas.mosaic.interpret.interpret_pallas_call"
MEMORY = "jax._src.pallas.mosaic.interpret.shared_memory"

# What a read through a transform other than an indexer needs: the split, the numpy transforms, and a
# named error for the paths that still need a plain range (writes, DMAs).
_TO_RANGE_OLD = """\
    # For now, assume only NDIndexer transforms.
    ret = _compose_slice_or_index("""
_TO_RANGE_NEW = """\
    if not isinstance(transform, indexing.NDIndexer):
      raise NotImplementedError(
          f'{type(transform).__name__} is not supported here by the TPU'
          ' interpreter: only reads (`ref[...]`) go through reshaped, bitcast'
          ' or transposed refs.'
      )
    ret = _compose_slice_or_index("""
_HELPERS = '''

def split_transforms(transforms) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
  """Splits `transforms` at the first one that is not an NDIndexer.

  The first part selects a range of the buffer (`to_range`); the rest, a
  reshape, bitcast or transpose and whatever follows it, applies to the value
  read from that range (`transform_value`).
  """
  transforms = tuple(transforms)
  for i, transform in enumerate(transforms):
    if not isinstance(transform, indexing.NDIndexer):
      return transforms[:i], transforms[i:]
  return transforms, ()


def bitcast(x: np.ndarray, dtype) -> np.ndarray:
  """NumPy version of `jax._src.state.utils.bitcast` (a TPU ref bitcast).

  A change of bitwidth packs (or unpacks) consecutive rows of the second-minor
  dimension, the first row in the low bits.
  """
  dtype = np.dtype(dtype)
  x_bits, y_bits = dtypes.itemsize_bits(x.dtype), dtypes.itemsize_bits(dtype)
  if x_bits < 8 or y_bits < 8:
    raise NotImplementedError(
        'Bitcast of a ref of a sub-byte dtype is not supported by the TPU'
        ' interpreter.'
    )
  x = np.ascontiguousarray(x)
  if x_bits == y_bits:
    return x.view(dtype)
  if x.ndim < 2:
    raise NotImplementedError(
        'Bitcast 1D ref with bitwidth change is not supported.'
    )
  if x.shape[-2] * x_bits % y_bits != 0:
    raise ValueError(
        'Expected input and output shapes are the same after multiplying'
        ' the second-minor dimension by the bitwidths.'
    )
  shape = (*x.shape[:-2], x.shape[-2] * x_bits // y_bits, x.shape[-1])
  if x_bits < y_bits:
    ratio = y_bits // x_bits
    x = x.reshape(*x.shape[:-2], x.shape[-2] // ratio, ratio, x.shape[-1])
    return np.ascontiguousarray(x.swapaxes(-1, -2)).view(dtype).reshape(shape)
  ratio = x_bits // y_bits
  y = x.view(dtype).reshape(*x.shape, ratio).swapaxes(-1, -2)
  return np.ascontiguousarray(y).reshape(shape)


def transform_value(
    value: np.ndarray,
    transforms,
    out_of_bounds_reads: str,
    uninitialized_memory: Literal['nan', 'zero'],
) -> np.ndarray:
  """Applies the ref transforms from the first non-NDIndexer on to a value read.

  An indexer out of bounds of the value it indexes raises, or reads
  uninitialized values, as `out_of_bounds_reads` says for buffer reads.
  """
  for transform in transforms:
    if isinstance(transform, state_types.ReshapeTransform):
      value = value.reshape(transform.shape)
    elif isinstance(transform, state_types.BitcastTransform):
      value = bitcast(value, transform.dtype)
    elif isinstance(transform, state_types.TransposeTransform):
      value = value.transpose(transform.permutation)
    elif isinstance(transform, indexing.NDIndexer):
      rnge = to_range((transform,))
      shape = value.shape[: len(rnge)]
      if not is_range_out_of_bounds_for_shape(rnge, shape):
        value = value[rnge]
        continue
      if out_of_bounds_reads == 'raise':
        raise IndexError(
            f'Out-of-bounds read of a transformed ref: reading [{rnge}] of a'
            f' value of shape {value.shape}.'
        )
      full_shape = [
          (r.stop - r.start + r.step - 1) // r.step
          for r in rnge
          if isinstance(r, slice)
      ] + list(value.shape[len(rnge):])
      out = np.full(
          full_shape,
          get_uninitialized_value(value.dtype, uninitialized_memory),
          dtype=value.dtype,
      )
      clipped = clip_range_to_shape(rnge, shape)
      if clipped is not None:
        part = value[clipped]
        out[tuple(slice(s) for s in part.shape)] = part
      value = out
    else:
      raise NotImplementedError(
          f'{type(transform).__name__} is not supported by the TPU interpreter.'
      )
  return value
'''
_IMPORTS = """\
from jax._src import dtypes
from jax._src.state import indexing
from jax._src.state import types as state_types


"""
_GET_SPLIT_OLD = """\
  read_range = interpret_utils.to_range(transforms)
"""
_GET_SPLIT_NEW = """\
  # A reshape, bitcast or transpose is no range of the buffer: the range of the
  # indexers before it is read, and the transforms from it on are applied to
  # the value read (so the race detector sees that whole range read).
  transforms, value_transforms = interpret_utils.split_transforms(transforms)
  read_range = interpret_utils.to_range(transforms)
"""
_GET_APPLY_OLD = """\
  if shared_memory.detect_races:
"""
_GET_APPLY_NEW = """\
  if value_transforms:
    ret = interpret_utils.transform_value(
        ret,
        value_transforms,
        shared_memory.out_of_bounds_reads,
        shared_memory.uninitialized_memory,
    )

  if shared_memory.detect_races:
"""
# A masked store marks every dimension's out-of-bounds part on axis 0 (`in_bounds_mask[n:]`), so a masked
# store into a [8, 2, 128] ref calls rows 2.. of axis 0 out of bounds and raises "Out-of-bounds masked swap".
# (Sources are dedented: a method's body starts at two spaces.)
_MASK_OLD = """\
          in_bounds_mask[in_bounds_shape[i] :] = False
"""
_MASK_NEW = """\
          in_bounds_mask[
              (slice(None),) * i + (slice(in_bounds_shape[i], None),)
          ] = False
"""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Edit:
    """`old` replaced by `new`, exactly once, in the source of `module`.`function` ("Class.method" for a method)."""

    module: str
    function: str
    old: str
    new: str


EDITS: tuple[Edit, ...] = (
    Edit(module=UTILS, function="to_range", old=_TO_RANGE_OLD, new=_TO_RANGE_NEW),
    Edit(module=UTILS, function="to_range", old="def to_range(", new=_IMPORTS + "def to_range("),
    Edit(module=UTILS, function="to_range", old="  return ret\n", new="  return ret\n" + _HELPERS),
    Edit(module=CALL, function="get", old=_GET_SPLIT_OLD, new=_GET_SPLIT_NEW),
    Edit(module=CALL, function="get", old=_GET_APPLY_OLD, new=_GET_APPLY_NEW),
    Edit(module=MEMORY, function="SharedMemory.swap_buffer_content", old=_MASK_OLD, new=_MASK_NEW),
)
# What every result computed under the patched interpreter carries (the adapters' conventions).
NAME = "kernels._tpu_interpret_fix"
STATUS_NOTE = (
    f"interpreted with {NAME} applied (its probe failed on the installed TPU interpret mode): reads through "
    "reshaped/bitcast/transposed refs and masked stores into 3-D refs, by exact source edits of the interpreter's "
    "to_range, get and SharedMemory.swap_buffer_content"
)


# The environment switch that leaves the installed interpreter unpatched; any other value does too, and the
# reason says to unset it (a misspelt "on" must not read as applied).
SWITCH = "ATTN_HARNESS_TPU_INTERPRET_FIX"
OFF = "off"


class FixError(RuntimeError):
    """The installed interpreter's source no longer has the text an edit replaces."""


def _lookup(module: types.ModuleType, name: str) -> tuple[Any, str]:
    """(the object holding the function, the function's own name) for "function" or "Class.method"."""
    owner, _, function = name.rpartition(".")
    return (getattr(module, owner) if owner else module), function


def _function_source(module: types.ModuleType, name: str) -> str:
    owner, function = _lookup(module, name)
    return textwrap.dedent(inspect.getsource(getattr(owner, function)))


@functools.cache
def edited_sources() -> dict[tuple[str, str], tuple[str, str]]:
    """(module, function) -> (installed source, edited source); FixError where an edit does not match once.
    Read once per process: after `ensure` applied the edits, the installed source is no longer inspectable."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for edit in EDITS:
        key = (edit.module, edit.function)
        if key not in out:
            source = _function_source(importlib.import_module(edit.module), edit.function)
            out[key] = (source, source)
        original, edited = out[key]
        found = edited.count(edit.old)
        if found != 1:
            raise FixError(
                f"{edit.module}.{edit.function}: {edit.old.strip().splitlines()[0]!r} occurs {found} times in "
                "the installed source; the fix needs exactly 1 (this jax moved the code: rewrite the edit)"
            )
        out[key] = (original, edited.replace(edit.old, edit.new))
    return out


def diff() -> str:
    """The fix as a unified diff of the installed functions (what an upstream pull request would change)."""
    parts = []
    for (module, function), (original, edited) in edited_sources().items():
        path = module.replace(".", "/") + ".py"
        parts.extend(
            difflib.unified_diff(
                original.splitlines(keepends=True),
                edited.splitlines(keepends=True),
                fromfile=f"a/{path} ({function})",
                tofile=f"b/{path} ({function})",
            )
        )
    return "".join(parts)


def _apply() -> None:
    missing = object()
    for (module_name, name), (_, edited) in edited_sources().items():
        module = importlib.import_module(module_name)
        owner, function = _lookup(module, name)
        # Compiled in the module's own namespace, so that the function reads the module's globals as the
        # original does; a method is then moved onto its class and the module's own binding of the name restored.
        kept = module.__dict__.get(function, missing)
        exec(compile(edited, f"<{NAME}: {module_name}.{name}>", "exec"), module.__dict__)  # noqa: S102
        if owner is not module:
            setattr(owner, function, module.__dict__[function])
            if kept is missing:
                del module.__dict__[function]
            else:
                module.__dict__[function] = kept


# --- The probes: each a kernel that reads through a transform, with the value numpy gives ---


def _reshaped(x_ref: Any, o_ref: Any) -> None:
    o_ref[...] = x_ref.reshape(16, 128)[...]


def _bitcast_strided(x_ref: Any, o_ref: Any) -> None:
    # As ragged_paged_attention reads bfloat16 pages: reshape, bitcast to 32 bits, every other row.
    o_ref[...] = x_ref.reshape(32, 128).bitcast("uint32")[1::2, :]


def _masked_store(x_ref: Any, o_ref: Any) -> None:
    # As ragged_paged_attention stores its accumulator [queries, q heads per kv head, head_dim]: rows 0-2 only.
    from jax import lax
    from jax.experimental.pallas import tpu as pltpu

    o_ref[...] = x_ref[...] * 0.0
    pltpu.store(o_ref, x_ref[...], mask=lax.broadcasted_iota("int32", o_ref.shape, 0) < 3)


def _probe_inputs() -> list[tuple[Callable[..., Any], Any, Any]]:
    import jax.numpy as jnp
    import numpy as np

    x = np.arange(2 * 8 * 128, dtype=np.float32).reshape(2, 8, 128)
    x3 = x.reshape(8, 2, 128)
    halves = np.arange(4 * 8 * 128, dtype=np.uint16).reshape(4, 8, 128)
    # uint16 pairs (rows 2i, 2i + 1) packed into uint32, row 2i in the low bits; then every other row.
    packed = (halves.reshape(16, 2, 128).astype(np.uint32) * np.array([1, 1 << 16], np.uint32)[:, None]).sum(1)
    return [
        (_reshaped, jnp.asarray(x), x.reshape(16, 128)),
        (_bitcast_strided, jnp.asarray(halves.view(jnp.bfloat16)), packed[1::2].astype(np.uint32)),
        (_masked_store, jnp.asarray(x3), np.where(np.arange(8)[:, None, None] < 3, x3, 0)),
    ]


def probe() -> str | None:
    """What the installed TPU interpret mode gets wrong on the probe kernels (one line), None when it serves them."""
    import jax
    import numpy as np
    from jax.experimental import pallas as pl

    from harness.core.errors import one_line
    from harness.runtime import interpret

    faithful = interpret.InterpretOptions(interpreter="faithful")
    # jax logs the traceback of a failing io_callback before raising it; here the failure is the answer.
    log = logging.getLogger("jax._src.callback")
    was, log.disabled = log.disabled, True
    try:
        for kernel, x, want in _probe_inputs():
            shape = jax.ShapeDtypeStruct(want.shape, want.dtype)
            try:
                with interpret.forced_interpret(), interpret.using_interpret_options(faithful):
                    with interpret.tpu_kernel_context():
                        got = np.asarray(pl.pallas_call(kernel, out_shape=shape)(x))
            except Exception as e:  # noqa: BLE001 - the interpreter's error is the probe's answer
                interpret.reset_tpu_interpreter()
                return f"{kernel.__name__}: {one_line(e)}"
            if not np.array_equal(got, want):
                return f"{kernel.__name__}: the value read differs from numpy's"
        return None
    finally:
        log.disabled = was


@dataclasses.dataclass(frozen=True, kw_only=True)
class Status:
    """What `ensure` found and did in this process."""

    applied: bool  # the edits are in the installed interpreter's modules
    before: str | None  # the probe's error before the edits (None: the interpreter served the probes)
    error: str | None = None  # why the interpreter still cannot serve the probes (None: it can)

    def note(self) -> str | None:
        """The words a record of a result computed under the patched interpreter carries, else None."""
        return STATUS_NOTE if self.applied else None


_lock = threading.Lock()


@functools.cache
def ensure() -> Status:
    """Serve reads through reshaped refs in this process: nothing where the probes pass, else the edits (once)."""
    with _lock:
        before = probe()
        if before is None:
            return Status(applied=False, before=None)
        switch = os.environ.get(SWITCH)
        if switch is not None:
            why = "switched off" if switch == OFF else f"not applied: {switch!r} is not {OFF!r}; unset it to apply"
            return Status(applied=False, before=before, error=f"{before}; the fix is {why} ({SWITCH}={switch})")
        try:
            _apply()
        except FixError as e:
            return Status(applied=False, before=before, error=f"{before}; the fix does not apply: {e}")
        after = probe()
        return Status(applied=True, before=before, error=None if after is None else f"{before}; patched: {after}")
