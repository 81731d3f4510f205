"""Build a copy of an upstream kernel module (flash attention by default) with exact textual edits.

A planted bug is a real one-line change to the real kernel, not a wrapper that
perturbs its output. Each edit must match the upstream source exactly as often as
declared; when jax moves the code, the planted module fails to build and says so.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import types

from jax.experimental.pallas.ops.tpu import flash_attention as upstream


class PatchError(RuntimeError):
    """The upstream source no longer contains the text a planted bug edits."""


def patched(
    upstream_module: types.ModuleType, name: str, edits: list[tuple[str, str, list[int] | None]]
) -> types.ModuleType:
    """A new module from `upstream_module`'s source with `old` replaced by `new` at the listed occurrences.

    edits: (old, new, occurrences); occurrences index the matches of `old` (0-based), or None
    for "exactly one match upstream", replaced.
    """
    source = inspect.getsource(upstream_module)
    for old, new, occurrences in edits:
        pieces = source.split(old)
        found = len(pieces) - 1
        if occurrences is None:
            if found != 1:
                raise PatchError(f"{name}: {old!r} occurs {found} times upstream; the edit needs exactly 1")
            occurrences = [0]
        if not occurrences or max(occurrences) >= found:
            raise PatchError(f"{name}: {old!r} occurs {found} times upstream; the edit needs occurrences {occurrences}")
        source = pieces[0] + "".join((new if i in occurrences else old) + p for i, p in enumerate(pieces[1:]))
    module_name = f"tests.planted._built_{name}"
    spec = importlib.util.spec_from_loader(module_name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = f"<planted {name}>"
    sys.modules[module_name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def patched_flash(name: str, edits: list[tuple[str, str, list[int]]]) -> types.ModuleType:
    """`patched` of the upstream flash-attention module."""
    return patched(upstream, name, edits)
