"""The old import path of what is now split by concern; new code imports the module it needs:

- harness.runtime.interpret: which Pallas interpreter runs a kernel, with which checks (InterpretOptions,
  tpu_kernel_context, the HLO interpreter, what a release lacks);
- harness.runtime.races: counting the data races the TPU interpret mode reports (RaceCounter);
- harness.runtime.caches: JAX's persistent compilation cache;
- harness.runtime.devices: the platform, compile-only TPU devices, compiled and device memory;
- harness.runtime.versions: the installed library versions, float64 mode.

Nothing is defined here; it holds no state. A test that replaces a function replaces it in its
own module (harness.runtime.devices.has_tpu), which is where the callers look it up.
"""

from __future__ import annotations

from harness.runtime.caches import (
    COMPILATION_CACHE_ENV,
    COMPILATION_CACHE_MAX_BYTES,
    compilation_cache_dir,
    enable_compilation_cache,
)
from harness.runtime.devices import (
    compile_only_env,
    compiled_cost,
    compiled_memory,
    default_platforms_env,
    device_bytes_in_use,
    device_peak_bytes,
    has_tpu,
    jax_platform,
    tpu_compile_device,
    tpu_device_files,
)
from harness.runtime.interpret import (
    DEFAULT_INTERPRET,
    INTERPRETERS,
    UNINITIALIZED_MEMORY,
    InterpreterUnavailable,
    InterpretOptions,
    faithful_interpreter,
    forced_interpret,
    hlo_interpret_mode,
    hlo_interpreter,
    interpret_options,
    reset_tpu_interpreter,
    tpu_kernel_context,
    using_interpret_options,
)
from harness.runtime.versions import enable_x64, library_versions

__all__ = [
    "COMPILATION_CACHE_ENV",
    "COMPILATION_CACHE_MAX_BYTES",
    "DEFAULT_INTERPRET",
    "INTERPRETERS",
    "UNINITIALIZED_MEMORY",
    "InterpretOptions",
    "InterpreterUnavailable",
    "compilation_cache_dir",
    "compile_only_env",
    "compiled_cost",
    "compiled_memory",
    "default_platforms_env",
    "device_bytes_in_use",
    "device_peak_bytes",
    "enable_compilation_cache",
    "enable_x64",
    "faithful_interpreter",
    "forced_interpret",
    "has_tpu",
    "hlo_interpret_mode",
    "hlo_interpreter",
    "interpret_options",
    "jax_platform",
    "library_versions",
    "reset_tpu_interpreter",
    "tpu_compile_device",
    "tpu_device_files",
    "tpu_kernel_context",
    "using_interpret_options",
]
