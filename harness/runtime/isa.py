"""The instruction set XLA's CPU compiler targets here: the host's level, capped by XLA_FLAGS.

The same program compiles to other machine code at each level (`--xla_cpu_max_isa`), and float16
has been seen to round differently between levels (issue 42), so a failure file records the level
it failed at (harness.running.failures) and `repro` says when it replays at another. `nox -s isa`
runs the ISA-sensitive tests at every level the host has (host_levels), and torch's at every CPU
capability it has (host_torch_capabilities, ATEN_CPU_CAPABILITY).
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Iterable

# The levels `--xla_cpu_max_isa` takes that the harness tests under, lowest first, each with the
# /proc/cpuinfo flag a host needs for it. XLA takes higher ones too (AVX512_VNNI, AMX...); a host
# with those has avx512f and is tested at AVX512.
LEVELS = ("SSE4_2", "AVX", "AVX2", "AVX512")
_FLAG = {"SSE4_2": "sse4_2", "AVX": "avx", "AVX2": "avx2", "AVX512": "avx512f"}
MAX_ISA_FLAG = "--xla_cpu_max_isa"
CPUINFO = "/proc/cpuinfo"

# What XLA's CPU JIT says when a program needs a symbol it does not link: without F16C (at SSE4_2)
# LLVM lowers every float16 conversion to compiler-rt's __extendhfsf2 / __truncsfhf2, which jaxlib
# 0.10.2 provides on macOS only (openxla/xla#6787, #21903), so no float16 program compiles.
_UNLINKED = "Failed to materialize symbols"


def cpu_flags(path: str = CPUINFO) -> frozenset[str]:
    """The first processor's `flags` in /proc/cpuinfo; empty where there is none (not Linux, not x86)."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def host_levels(flags: Iterable[str] | None = None) -> tuple[str, ...]:
    """The LEVELS a host with these cpuinfo `flags` (default: this host's) runs, lowest first.

    SSE4_2 always: it is XLA's lowest level, and x86-64 jaxlib wheels need it to load at all.
    """
    have = cpu_flags() if flags is None else frozenset(flags)
    return ("SSE4_2", *(level for level in LEVELS[1:] if _FLAG[level] in have))


# torch dispatches its CPU kernels by the host's capability too (torch.backends.cpu.get_cpu_capability()),
# capped by ATEN_CPU_CAPABILITY; the values it takes, lowest first, with the cpuinfo flags each needs.
# torch's AVX512 kernels need AVX512-F, BW, VL and DQ.
TORCH_CAPABILITY_ENV = "ATEN_CPU_CAPABILITY"
TORCH_CAPABILITIES = ("default", "avx2", "avx512")
_TORCH_FLAGS = {"default": (), "avx2": ("avx2", "fma"), "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512dq")}


def host_torch_capabilities(flags: Iterable[str] | None = None) -> tuple[str, ...]:
    """The TORCH_CAPABILITIES a host with these cpuinfo `flags` (default: this host's) runs, lowest first."""
    have = cpu_flags() if flags is None else frozenset(flags)
    return tuple(c for c in TORCH_CAPABILITIES if all(f in have for f in _TORCH_FLAGS[c]))


def max_isa(xla_flags: str | None = None) -> str | None:
    """The level `--xla_cpu_max_isa` sets in `xla_flags` (default: $XLA_FLAGS), upper-cased; None when
    unset. The last one wins, as in XLA's own parser."""
    text = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    found = None
    for word in shlex.split(text):
        name, eq, value = word.partition("=")
        if name == MAX_ISA_FLAG and eq:
            found = value.strip().upper() or None
    return found


def level(flags: Iterable[str] | None = None, xla_flags: str | None = None) -> str:
    """The level XLA compiles for: the host's highest, or the cap if that is lower (a cap above the
    host changes nothing, and so does one above LEVELS)."""
    host = host_levels(flags)[-1]
    cap = max_isa(xla_flags)
    if cap not in LEVELS:  # unset, or above AVX512 (AVX512_VNNI, AMX...)
        return host
    return cap if LEVELS.index(cap) < LEVELS.index(host) else host


def describe() -> dict[str, str | None]:
    """What a record keeps of the host's ISA: `isa` the level XLA compiles for, `host` the host's highest,
    `xla_cpu_max_isa` the cap from XLA_FLAGS (None when unset)."""
    return {"isa": level(), "host": host_levels()[-1], "xla_cpu_max_isa": max_isa()}


def difference(recorded: dict[str, str | None] | None) -> str | None:
    """'recorded -> here' when the level XLA compiles for differs from `recorded`'s (describe()), with
    where this one comes from; None when the same, or for a record written before the level was kept."""
    if not recorded or recorded.get("isa") is None:
        return None
    here = describe()
    if recorded["isa"] == here["isa"]:
        return None
    cap = here["xla_cpu_max_isa"]
    source = f"{MAX_ISA_FLAG}={cap}" if cap else f"this host's highest, {here['host']}"
    return f"{recorded['isa']} -> {here['isa']} ({source})"


@functools.cache
def float16_refusal() -> str | None:
    """Why XLA's CPU compiler cannot compile float16 at this level (one line naming the fix), or None.

    Measured with jaxlib 0.10.2 on an AMD EPYC: at SSE4_2 every float16 program, a lone add
    included, fails to link; at AVX and above (F16C) all compile. Probed once per process.
    """
    import jax
    import numpy as np

    from harness.runtime import placement

    x = jax.device_put(np.ones(4, np.float16), placement.reference_device())
    try:
        jax.jit(lambda a: a + a)(x).block_until_ready()
    except Exception as e:  # noqa: BLE001 - jaxlib's error type moved between releases
        if _UNLINKED not in str(e):
            raise
        return (
            f"XLA's CPU compiler (jax {jax.__version__}) cannot compile float16 at {MAX_ISA_FLAG}={level()}: "
            f"{str(e).splitlines()[0]}; set {MAX_ISA_FLAG} to AVX or higher"
        )
    return None
