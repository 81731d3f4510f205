"""Upstream's source of each Pallas kernel module, per jax release: read from the release's wheel.

A source store is a directory of `RELEASE/PATH` files (PATH as in the wheel, e.g.
jax/experimental/pallas/ops/tpu/flash_attention.py), one folder per release, written once by
`fetch` (pip downloads the wheel, the kernel modules are kept, the wheel dropped) and read offline
after. A release folder holds a COMPLETE marker once every kernel module it has was kept, so a
module the release lacks (ragged before 0.5.1) is told from one never fetched. The installed jax is
read from its own files and named "RELEASE (installed)".
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from harness.core.errors import InputError

# Each built-in kernel whose module a fork replaces, and that module's path in the jax wheel (the
# adapters' own `_F`, `_K`, ... constants), and its label in docs/data/history_bugs.json.
KERNELS = {
    "pallas_flash": ("jax/experimental/pallas/ops/tpu/flash_attention.py", "Pallas TPU flash"),
    "pallas_splash": ("jax/experimental/pallas/ops/tpu/splash_attention/splash_attention_kernel.py", "splash"),
    "pallas_paged": ("jax/experimental/pallas/ops/tpu/paged_attention/paged_attention_kernel.py", "paged"),
    "pallas_ragged_paged": ("jax/experimental/pallas/ops/tpu/ragged_paged_attention/kernel.py", "ragged paged"),
    "pallas_gpu": ("jax/experimental/pallas/ops/gpu/attention.py", "Pallas GPU mha"),
    "pallas_gpu_decode": ("jax/experimental/pallas/ops/gpu/decode_attention.py", "Pallas GPU decode"),
}
# The first release fetched: docs/history.md lists upstream's fixes from here on.
FIRST_RELEASE = "0.4.30"
COMPLETE = "COMPLETE"
INSTALLED = " (installed)"


def cache_dir() -> Path:
    """$ATTN_HARNESS_UPSTREAM_SOURCES, else $XDG_CACHE_HOME (or ~/.cache)/attention-harness/upstream-sources."""
    given = os.environ.get("ATTN_HARNESS_UPSTREAM_SOURCES")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attention-harness" / "upstream-sources"


def release_key(release: str) -> tuple[int, ...]:
    """'0.9.0.1' -> (0, 9, 0, 1), for ordering; a name that is no release sorts first."""
    numbers = re.match(r"\d+(\.\d+)*", release)
    return tuple(int(n) for n in numbers.group(0).split(".")) if numbers else ()


def path_of(kernel: str) -> str:
    """The wheel path of `kernel`'s module; InputError naming the kernels known."""
    if kernel not in KERNELS:
        raise InputError(f"kernel={kernel!r} has no upstream module here; one of {', '.join(KERNELS)}")
    return KERNELS[kernel][0]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source:
    """One release's text of one kernel module."""

    release: str  # "0.9.0", or "0.12.1 (installed)"
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)


def stored(store: Path, kernel: str) -> list[Source]:
    """Every release in `store` that has `kernel`'s module, oldest first."""
    path = path_of(kernel)
    found = [d for d in store.iterdir() if d.is_dir() and (d / path).is_file()] if store.is_dir() else []
    found.sort(key=lambda d: release_key(d.name))
    return [Source(release=d.name, text=(d / path).read_text()) for d in found]


def installed(kernel: str) -> Source | None:
    """The installed jax's module of `kernel`, read from its file without importing it; None if it has none."""
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.origin:
        return None
    file = Path(spec.origin).parent.parent / path_of(kernel)
    if not file.is_file():
        return None
    return Source(release=importlib.metadata.version("jax") + INSTALLED, text=file.read_text())


def sources(store: Path, kernel: str) -> list[Source]:
    """The stored releases of `kernel`'s module and the installed one (unless stored as the same release)."""
    found = stored(store, kernel)
    here = installed(kernel)
    if here is not None and here.release.removesuffix(INSTALLED) not in {s.release for s in found}:
        found.append(here)
        found.sort(key=lambda s: release_key(s.release))
    return found


def published(python: str = sys.executable) -> list[str]:
    """jax's releases on the package index from FIRST_RELEASE on, oldest first (`pip index versions jax`)."""
    out = subprocess.run([python, "-m", "pip", "index", "versions", "jax"], capture_output=True, text=True, check=False)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("Available versions:")), None)
    if line is None:
        raise InputError(f"pip index versions jax listed no releases: {(out.stderr or out.stdout).strip()[-300:]}")
    names = [v.strip() for v in line.partition(":")[2].split(",")]
    return sorted((v for v in names if release_key(v) >= release_key(FIRST_RELEASE)), key=release_key)


def fetch(store: Path, releases: list[str], *, python: str = sys.executable, say=print) -> list[str]:
    """Keep each release's kernel modules under `store`, downloading the wheels not yet kept; the
    releases whose download failed (each told through `say`)."""
    failed = []
    for release in releases:
        folder = store / release
        if (folder / COMPLETE).exists():
            continue
        say(f"fetching jax {release} ...")
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [python, "-m", "pip", "download", f"jax=={release}", "--no-deps", "-q", "-d", tmp]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            wheels = list(Path(tmp).glob("*.whl"))
            if done.returncode != 0 or not wheels:
                say(f"jax {release}: pip download failed: {(done.stderr or done.stdout).strip()[-300:]}")
                failed.append(release)
                continue
            with zipfile.ZipFile(wheels[0]) as wheel:
                names = set(wheel.namelist())
                for path, _ in KERNELS.values():
                    if path in names:
                        (folder / path).parent.mkdir(parents=True, exist_ok=True)
                        (folder / path).write_bytes(wheel.read(path))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / COMPLETE).write_text("")
    return failed
