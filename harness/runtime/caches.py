"""JAX's persistent compilation cache: where compiled programs are kept across runs; and where the
answers of probes too slow to repeat every run are kept (probe_cache_dir).

The references compile once per shape and dtype (harness.core.jaxvjp.compiled_outputs) and are read
back from here by the next run; so are the kernels the worker compiles under the fast interpreter
(the Pallas HLO interpreter: plain XLA ops). Programs with host callbacks (every kernel under the
TPU interpret mode, the faithful interpreter) are never served from it: JAX keys them by their
callbacks. Every process that compiles enables it (the search, the kernel worker) and trims it to
COMPILATION_CACHE_MAX_BYTES once.
"""

from __future__ import annotations

import contextlib
import os
import sys

# The directory, or "off" to disable the cache.
COMPILATION_CACHE_ENV = "ATTN_HARNESS_COMPILATION_CACHE"
COMPILATION_CACHE_MAX_BYTES = 2 * 2**30


def compilation_cache_dir() -> str | None:
    """$ATTN_HARNESS_COMPILATION_CACHE, else $XDG_CACHE_HOME (or ~/.cache)/attention-harness/jax; None when "off"."""
    chosen = os.environ.get(COMPILATION_CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("off", "") else chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "attention-harness", "jax")


# The directory of the probes' answers kept across runs (harness.running.exactness), or "off".
PROBE_CACHE_ENV = "ATTN_HARNESS_PROBE_CACHE"


def probe_cache_dir() -> str | None:
    """$ATTN_HARNESS_PROBE_CACHE, else $XDG_CACHE_HOME (or ~/.cache)/attention-harness/probes; None when "off"."""
    chosen = os.environ.get(PROBE_CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("off", "") else chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "attention-harness", "probes")


def enable_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache (once; a directory set by the user is kept); returns it."""
    import jax

    path = jax.config.jax_compilation_cache_dir or compilation_cache_dir()
    if path is None or jax.config.jax_compilation_cache_dir == path or path in _REFUSED:
        return None if path in _REFUSED else path
    jax.config.update("jax_compilation_cache_dir", path)
    # The references compile in a fraction of a second, under JAX's default threshold of 1 s.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    # JAX's own size limit is left off (its default): with one, every write lists the whole
    # directory, a stat and a read per entry, so a run's writes cost the square of its programs
    # (measured: 473 writes read 111,628 entries, 22.7 s of a 60-case run's 488 under cProfile,
    # starting from an empty cache), growing with every run that fills it. The limit is kept
    # instead by trimming the directory once per process.
    trim(path, COMPILATION_CACHE_MAX_BYTES)
    # JAX decides once, at its first compilation, whether the cache is used: a program compiled
    # before this call (a kernel's cannot-run probe) would leave it off for the whole process.
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()
    refused = _round_trip_refusal(path)
    if refused is not None:
        _REFUSED.add(path)
        jax.config.update("jax_compilation_cache_dir", None)
        compilation_cache.reset_cache()
        print(f"attention-harness: the persistent compilation cache is off: {refused}", file=sys.stderr)
        return None
    return path


# A program read back from the cache must compute what it computed when compiled. jaxlib 0.5.3's did
# not for a loop whose trip count is computed inside another loop: the Pallas GPU kernel's causal
# forward under its interpreter is one, and every case served from the cache came out NaN, reported
# as the kernel's failure (nox -s history; docs/findings/jax_persistent_cache_round_trip.md).
ROUND_TRIP_FINDING = "docs/findings/jax_persistent_cache_round_trip.md"
_REFUSED: set[str] = set()  # the directories this process found untrustworthy (said once)


def _round_trip_probe():  # noqa: ANN202 - a jitted function and its input
    import jax
    import jax.numpy as jnp
    from jax import lax

    x = jnp.arange(64 * 64, dtype=jnp.float32).reshape(64, 64) % 7 - 3

    @jax.jit
    def probe(x):  # noqa: ANN001, ANN202 - the reproducer's program
        def row(j, out):  # noqa: ANN001, ANN202
            def step(i, carry):  # noqa: ANN001, ANN202
                m, total = carry
                tile = lax.dynamic_slice(x, (j * 16, i * 16), (16, 16))
                new = jnp.maximum(m, tile.max(-1))
                return new, total * jnp.exp(m - new) + jnp.exp(tile - new[:, None]).sum(-1)

            start = (jnp.full((16,), -0.7 * 3.4e38, jnp.float32), jnp.zeros((16,), jnp.float32))
            m, total = lax.fori_loop(0, lax.div(16 * (j + 1) + 15, 16), step, start)
            return lax.dynamic_update_slice(out, (m + jnp.log(total))[:, None] * jnp.ones((1, 64)), (j * 16, 0))

        return lax.fori_loop(0, 4, row, jnp.zeros_like(x))

    return probe, x


def _round_trip_refusal(path: str) -> str | None:
    """Why this jax's cache cannot be trusted (a program read back computes other bits than when it was
    compiled), or None; checked once per jax release and cache directory, the answer kept beside it."""
    import jax
    import jaxlib
    import numpy as np

    marker = os.path.join(path, f".round-trip-jax{jax.__version__}-jaxlib{jaxlib.__version__}")
    with contextlib.suppress(OSError):
        with open(marker) as f:
            kept = f.read().strip()
        return None if kept == "ok" else kept
    probe, x = _round_trip_probe()
    compiled = np.asarray(probe(x))
    jax.clear_caches()  # the next call is served from the directory
    served = np.asarray(probe(x))
    same = compiled.tobytes() == served.tobytes()
    answer = (
        "ok"
        if same
        else (
            f"jax {jax.__version__} (jaxlib {jaxlib.__version__}) serves back programs that compute other values "
            f"than when compiled ({ROUND_TRIP_FINDING})"
        )
    )
    with contextlib.suppress(OSError):
        os.makedirs(path, exist_ok=True)
        with open(marker, "w") as f:
            f.write(answer + "\n")
    return None if same else answer


def trim(path: str, max_bytes: int) -> int:
    """Delete the oldest-written files of `path` until the rest hold at most `max_bytes`; returns how
    many it deleted. A file another process deletes first is skipped: JAX treats a missing or
    unreadable entry as a miss and compiles again."""
    entries = []
    with contextlib.suppress(FileNotFoundError), os.scandir(path) as found:
        for e in found:
            with contextlib.suppress(FileNotFoundError):
                if e.is_file(follow_symlinks=False) and not e.name.startswith("."):  # not JAX's .lockfile
                    st = e.stat(follow_symlinks=False)
                    entries.append((st.st_mtime_ns, e.name, st.st_size))
    total = sum(size for *_, size in entries)
    deleted = 0
    for _, name, size in sorted(entries):
        if total <= max_bytes:
            break
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(path, name))
            deleted += 1
        total -= size
    return deleted
