"""The installed releases of every library whose upgrade can change a result, and the one API
outside the interpreter (harness.runtime.interpret) whose place moved between them: float64 mode."""

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


def missing_api(e: BaseException) -> str | None:
    """`e` in one line when it says the installed jax lacks an API the harness or an adapter calls (a module,
    or a name in one: added in a later release, or renamed); None for any other error.

    Such an error is the harness's gap in that release ("cannot run here"), never the kernel's failure.
    """
    text = str(e).splitlines()[0] if str(e) else ""
    if isinstance(e, AttributeError) and text.startswith("module 'jax"):
        return f"{type(e).__name__}: {text}"
    if isinstance(e, ImportError) and (e.name or "").split(".")[0] in ("jax", "jaxlib"):
        return f"{type(e).__name__}: {text}"
    return None
