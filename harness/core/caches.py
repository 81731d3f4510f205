"""JAX's persistent compilation cache: where compiled programs are kept across runs.

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


def enable_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache (once; a directory set by the user is kept); returns it."""
    import jax

    path = jax.config.jax_compilation_cache_dir or compilation_cache_dir()
    if path is None or jax.config.jax_compilation_cache_dir == path:
        return path
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
    return path


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
