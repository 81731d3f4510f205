"""Shared fixtures. JAX must see JAX_PLATFORMS before it is imported: set here, as a process start."""

import os
import sys

# The suite starts hundreds of Python processes (`python -m harness` commands, their kernel workers), each
# importing jax and many torch: about 2 CPU seconds apiece compiling their sources where no bytecode is kept.
# Where writing bytecode is off ($PYTHONDONTWRITEBYTECODE), it is kept under this environment's prefix instead,
# away from the sources, so that each module compiles once per environment rather than once per process.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = os.path.join(sys.prefix, "pycache")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.dont_write_bytecode = False

from harness.runtime import compat  # noqa: E402

compat.default_platforms_env()  # a process start: JAX_PLATFORMS=cpu where no TPU is attached, before jax loads

# `run` starts one worker process per core by default (harness.running.jobs); the tests of one run's
# output and store run it in one process, and tests/test_shards.py asks for workers explicitly.
os.environ.setdefault("ATTN_HARNESS_JOBS", "1")

import pytest  # noqa: E402

from harness.core import smoke  # noqa: E402


@pytest.fixture(autouse=True)
def _no_smoke_cache(monkeypatch):
    """In this process the smoke sets are found, never read from the user's disk cache: a test that
    counts what finding them does must see it done. tests/test_smoke.py tests the cache itself."""
    monkeypatch.setattr(smoke, "cache_path", lambda impl: None)
