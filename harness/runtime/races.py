"""Counting the data races the TPU interpret mode reports, across every kernel of a block.

The interpreter keeps one RaceDetectionState per pallas_call (a module global replaced when the
next kernel starts), so reading its flag after a forward and backward pass would see only the
last kernel. A RaceCounter's counting() block replaces the interpreter's class by a subclass that
reports every state's races to that counter, and puts the original back after the block: the
count is the counter's, the patch the block's, and nothing outlives either.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

# Where the interpreter creates its RaceDetectionState, by release: a package from jax 0.8
# (interpret/interpret_pallas_call.py), one module before (interpret.py, jax 0.7.x).
_STATE_MODULES = (
    "jax._src.pallas.mosaic.interpret.interpret_pallas_call",
    "jax._src.pallas.mosaic.interpret",
)


def _state_module() -> ModuleType:
    """The module whose RaceDetectionState the interpreter instantiates; RuntimeError when none has it."""
    for name in _STATE_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if isinstance(getattr(module, "RaceDetectionState", None), type):
            return module
    raise RuntimeError(f"cannot count data races on this jax: no RaceDetectionState in any of {_STATE_MODULES}")


def countable() -> str | None:
    """Why races cannot be counted on this jax, or None when they can."""
    try:
        _state_module()
    except RuntimeError as e:
        return str(e)
    return None


class RaceCounter:
    """The races interpreted kernels reported inside this counter's counting() blocks."""

    def __init__(self) -> None:
        self.count = 0

    @property
    def found(self) -> bool:
        return self.count > 0

    def counting(self) -> contextlib.AbstractContextManager[RaceCounter]:
        """A block inside which every race state the interpreter creates reports its races here.

        Raises RuntimeError now, before any block, where this jax has no race state to count."""
        return self._patched(_state_module())

    @contextlib.contextmanager
    def _patched(self, module: ModuleType) -> Iterator[RaceCounter]:
        base = module.RaceDetectionState
        counter = self

        class CountingRaceDetectionState(base):  # type: ignore[misc, valid-type]
            def __setattr__(self, name: str, value: Any) -> None:
                if name == "races_found" and value:
                    counter.count += 1
                super().__setattr__(name, value)

        module.RaceDetectionState = CountingRaceDetectionState
        try:
            yield self
        finally:
            module.RaceDetectionState = base
