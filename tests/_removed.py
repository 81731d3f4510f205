"""Skips for tests of an upstream module that a jax release removed.

Whether a test runs is decided by importing the module, never by the version number: where the installed
jax has the module the test runs unchanged, and where it does not the skip names the release that removed it.
`nox -s previous` runs these tests on the previous default (noxfile.REMOVED_MODULE_TESTS lists them).
"""

from __future__ import annotations

import functools
import importlib

import pytest

GPU_ATTENTION = "jax.experimental.pallas.ops.gpu.attention"
GPU_DECODE = "jax.experimental.pallas.ops.gpu.decode_attention"
# The first release without each module, for the skip's reason only. Read from the wheels: 0.12.0.1 has both,
# 0.12.1's jax/experimental/pallas/ops/gpu/ holds only the Mosaic GPU (*_mgpu.py) modules.
REMOVED_IN = {GPU_ATTENTION: "jax 0.12.1", GPU_DECODE: "jax 0.12.1"}


@functools.cache
def missing(module: str) -> str | None:
    """Why the installed jax cannot import `module` (naming the release that removed it), None where it can.

    Only the module's own absence is a skip: a module that is there and fails to import raises, as a test would.
    """
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (module == e.name or module.startswith(f"{e.name}.")):
            raise
        return f"the installed jax has no {module} ({REMOVED_IN[module]} removed it); `nox -s previous` runs it"
    return None


def needs(module: str) -> pytest.MarkDecorator:
    """A mark for a test or a pytest.param: skipped where the installed jax cannot import `module`."""
    reason = missing(module)
    return pytest.mark.skipif(reason is not None, reason=reason or f"{module} imports")


def require(module: str) -> None:
    """At the top of a test module, before it imports `module` or an adapter of it: the whole module is skipped
    where the installed jax cannot import `module`."""
    __tracebackhide__ = True  # pytest then reports the skip at the test module's line, not this one
    if reason := missing(module):
        pytest.skip(reason, allow_module_level=True)
