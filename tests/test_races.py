"""races: a RaceCounter counts the races of every interpreted kernel in its block, and no longer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from harness.runtime import interpret, races
from tests._racy import racy


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _clean(x):
    return pl.pallas_call(_copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


DETECTING = interpret.InterpretOptions(detect_races=True)


def test_a_race_in_an_earlier_kernel_call_is_not_forgotten():
    # The interpreter keeps one race state per pallas_call: a clean call after a racy one must not hide it.
    x = jnp.ones((8, 128), jnp.float32)
    counter = races.RaceCounter()
    with interpret.using_interpret_options(DETECTING), counter.counting(), interpret.tpu_kernel_context():
        jax.block_until_ready(_clean(x))
        assert not counter.found
        jax.block_until_ready(racy(x))
        jax.block_until_ready(_clean(x))
    assert counter.found


def test_the_count_is_the_counters_and_the_patch_ends_with_its_block():
    module = races._state_module()
    original = module.RaceDetectionState
    x = jnp.ones((8, 128), jnp.float32)
    first, second = races.RaceCounter(), races.RaceCounter()
    with interpret.using_interpret_options(DETECTING), interpret.tpu_kernel_context():
        with first.counting():
            assert module.RaceDetectionState is not original
            jax.block_until_ready(racy(x))
        assert module.RaceDetectionState is original
        with second.counting():
            jax.block_until_ready(_clean(x))
        jax.block_until_ready(racy(x))  # outside any counter's block: nobody's race
    assert first.found and not second.found and second.count == 0


def test_a_jax_with_no_race_state_says_so_before_any_kernel_runs(monkeypatch):
    monkeypatch.setattr(races, "_STATE_MODULES", ("jax._src.no_such_module",))
    assert "cannot count data races on this jax" in races.countable()
    with pytest.raises(RuntimeError, match="no RaceDetectionState"):
        races.RaceCounter().counting()
