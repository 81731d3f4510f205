"""Wheels built in a test, for a local package index (a --find-links directory): offline releases."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def build_wheel(
    out: Path,
    name: str,
    version: str,
    files: dict[str, str],
    requires: tuple[str, ...] = (),
    *,
    requires_python: str | None = None,
    tag: str = "py3-none-any",
) -> Path:
    """A pure-Python wheel of `files` (path -> text), as `pip wheel` would build from that source tree; `tag`
    such as "cp312-none-any" makes it a wheel for one Python only, as binary packages' are."""
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += f"Requires-Python: {requires_python}\n" if requires_python else ""
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        **files,
        f"{info}/METADATA": meta,
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: tests.wheels\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    digest = lambda t: base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()  # noqa: E731
    record = [f"{p},sha256={digest(t)},{len(t.encode())}" for p, t in files.items()] + [f"{info}/RECORD,,"]
    path = out / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, t in {**files, f"{info}/RECORD": "\n".join(record) + "\n"}.items():
            z.writestr(p, t)
    return path
