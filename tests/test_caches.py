"""harness.runtime.caches: JAX's persistent compilation cache, kept to its size by one trim per process
(JAX's own limit scans the whole directory on every write), and used by the kernel worker too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.running import worker
from harness.runtime import caches, compat
from tests._fakes import CORRECT, small_case

ROOT = Path(__file__).resolve().parents[1]


def _entry(path: Path, size: int, age_s: int) -> Path:
    path.write_bytes(b"x" * size)
    t = 1_700_000_000 - age_s
    os.utime(path, (t, t))
    return path


def test_trim_deletes_the_oldest_written_until_the_rest_fit(tmp_path: Path) -> None:
    old, middle, new = (_entry(tmp_path / f"{n}-cache", 100, age) for n, age in (("a", 30), ("b", 20), ("c", 10)))
    lock = _entry(tmp_path / ".lockfile", 1000, 40)  # JAX's lock, never counted or deleted
    (tmp_path / "sub").mkdir()
    assert caches.trim(str(tmp_path), 300) == 0  # fits: nothing deleted
    assert caches.trim(str(tmp_path), 250) == 1
    assert not old.exists() and middle.exists() and new.exists() and lock.exists()
    assert caches.trim(str(tmp_path), 0) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lockfile", "sub"]
    assert caches.trim(str(tmp_path / "missing"), 0) == 0  # a cache not made yet


def test_enabling_leaves_jaxs_size_limit_off_and_trims_once(tmp_path: Path) -> None:
    """In a fresh process, as a run starts: the directory trimmed to the limit, JAX's per-write
    eviction off, and what compiles written to the directory."""
    cache = tmp_path / "jax"
    cache.mkdir()
    _entry(cache / "stale-cache", 5000, 100)
    script = (
        "import jax, jax.numpy as jnp\n"
        "from harness.runtime import caches\n"
        "caches.COMPILATION_CACHE_MAX_BYTES = 1000\n"
        "print(caches.enable_compilation_cache())\n"
        "print(jax.config.jax_compilation_cache_max_size)\n"
        "jax.jit(lambda x: x * 3 + 1)(jnp.ones(7)).block_until_ready()\n"
    )
    env = {**os.environ, caches.COMPILATION_CACHE_ENV: str(cache), "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(cache), "-1"]
    written = [p.name for p in cache.iterdir() if not p.name.startswith(".")]
    assert "stale-cache" not in written and written  # trimmed, then the new program written


def test_the_kernel_worker_writes_its_programs_to_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast interpreter's programs have no host callbacks: the worker keeps them for the next run."""
    cache = tmp_path / "jax"
    monkeypatch.setenv(caches.COMPILATION_CACHE_ENV, str(cache))
    with worker.session() as mine:
        got = worker.execute(CORRECT, small_case(), grads=True, time_limit=120, interpret=compat.DEFAULT_INTERPRET)
        assert got.error is None, got.error
        assert mine.alive
    assert any(p.name.endswith("-cache") for p in cache.iterdir())


def _enable_in_a_fresh_process(cache: Path, setup: str = "") -> subprocess.CompletedProcess:
    script = f"from harness.runtime import caches\n{setup}print(caches.enable_compilation_cache())\n"
    env = {**os.environ, caches.COMPILATION_CACHE_ENV: str(cache), "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)


def test_a_cache_that_serves_back_other_values_than_it_compiled_is_left_off(tmp_path: Path) -> None:
    # jaxlib 0.5.3 served the Pallas GPU kernel's causal forward back from the cache computing NaN, and
    # every such case was reported as the kernel's failure (docs/findings/jax_persistent_cache_round_trip.md).
    cache = tmp_path / "jax"
    # A stand-in for such a release: the program "served back" computes one more than when compiled.
    bad = (
        "import itertools, jax.numpy as jnp\n"
        "calls = itertools.count()\n"
        "caches._round_trip_probe = lambda: ((lambda x: x + next(calls)), jnp.zeros(3))\n"
    )
    first = _enable_in_a_fresh_process(cache, bad)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.split() == ["None"]
    assert "the persistent compilation cache is off" in first.stderr and caches.ROUND_TRIP_FINDING in first.stderr
    # The answer is kept beside the cache: the next process does not probe again, and leaves it off too.
    again = _enable_in_a_fresh_process(cache, "caches._round_trip_probe = None\n")
    assert again.stdout.split() == ["None"], again.stderr[-2000:]
    (marker,) = cache.glob(".round-trip-*")
    assert caches.ROUND_TRIP_FINDING in marker.read_text()


def test_the_installed_jax_serves_back_what_it_compiled(tmp_path: Path) -> None:
    cache = tmp_path / "jax"
    proc = _enable_in_a_fresh_process(cache)
    assert proc.stdout.split() == [str(cache)], proc.stderr[-2000:]
    (marker,) = cache.glob(".round-trip-*")
    assert marker.read_text().strip() == "ok"
