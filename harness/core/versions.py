"""The installed releases of every library whose upgrade can change a result, and the one API
outside the interpreter (harness.core.interpret) whose place moved between them: float64 mode."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def library_versions() -> dict[str, str | None]:
    """Versions of every library whose upgrade can change a result."""
    import importlib.metadata as md
    import platform

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "jax": version("jax"),
        "jaxlib": version("jaxlib"),
        "libtpu": version("libtpu") or version("libtpu-nightly"),
        "torch": version("torch"),
        "numpy": version("numpy"),
        "hypothesis": version("hypothesis"),
        "harness": version("attention-harness"),
    }


@contextlib.contextmanager
def enable_x64() -> Iterator[None]:
    """float64 inside the block only; the kernels under test never see it."""
    import jax

    if hasattr(jax, "enable_x64"):  # jax >= 0.7
        with jax.enable_x64(True):
            yield
    else:  # older jax
        from jax.experimental import enable_x64 as ctx

        with ctx():
            yield
