"""What the default's torch costs a fresh machine: the wheels to download, the bytes installed, the install time.

PyPI's Linux torch wheels are CUDA builds that run on a CPU; their CUDA libraries come as separate
packages (nvidia-*, cuda-*, triton). This installs constraints/default.txt's torch alone into a new
virtualenv with uv and an empty cache (so everything is downloaded), on the newest Python the default
declares that is installed here, and records:

- download: the size of every wheel the resolution takes, as the package index lists it;
- installed: the bytes under the environment's site-packages, and the torch-and-CUDA part of them;
- seconds: the install's wall time (downloads included: the index's speed from this machine).

    python benchmarks/torch_cost.py [--out FILE] [--index-url URL]

The README's "Two commands" gives the figures of the committed record (benchmarks/results/torch_cost.json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.environments import envs, pythons  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "torch_cost.json"
PYPI = "https://pypi.org/simple"
# The distributions that are torch and its CUDA build, as opposed to what any environment has.
CUDA_PART = re.compile(r"^(torch|triton|nvidia|cuda)")


def _wheel_sizes(pins: list[str], index: str) -> dict[str, int]:
    """name==version -> the size of the wheel uv would take for this platform, from the index's JSON API."""
    out = {}
    for pin in pins:
        name, version = pin.split("==")
        req = urllib.request.Request(f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        files = json.load(urllib.request.urlopen(req, timeout=60))["files"]
        tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
        wheels = [
            f
            for f in files
            if f["filename"].endswith(".whl")
            and f"-{version}-" in f["filename"]
            and ("x86_64" in f["filename"] or "any.whl" in f["filename"])
            and (tag in f["filename"] or "py3" in f["filename"] or "abi3" in f["filename"])
        ]
        out[pin] = min(f["size"] for f in wheels) if wheels else 0
    return out


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--index-url", default=PYPI)
    args = p.parse_args()
    torch = envs.pinned((ROOT / "constraints" / "default.txt").read_text())["torch"]
    chosen = pythons.choose()
    if chosen is None:
        print(pythons.missing(), file=sys.stderr)
        return 2
    version, python = chosen
    with tempfile.TemporaryDirectory() as tmp:
        venv, cache = Path(tmp) / "venv", Path(tmp) / "cache"
        env = {**os.environ, "UV_CACHE_DIR": str(cache), "UV_NO_CONFIG": "1"}
        uv = envs.uv_binary()
        subprocess.run([uv, "venv", "-q", "-p", python, str(venv)], check=True, env=env)
        start = time.perf_counter()
        cmd = [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), "--index-url", args.index_url, torch]
        subprocess.run(cmd, check=True, env=env)
        seconds = time.perf_counter() - start
        listed = subprocess.run(
            [uv, "pip", "freeze", "-p", str(venv / "bin" / "python")],
            env=env,
            text=True,
            capture_output=True,
            check=True,
        ).stdout.split()
        site = next((venv / "lib").glob("python*/site-packages"))
        installed = _du(site)
        cuda = sum(
            _du(d) for d in site.iterdir() if d.is_dir() and CUDA_PART.match(d.name) and "dist-info" not in d.name
        )
        shutil.rmtree(cache, ignore_errors=True)
    sizes = _wheel_sizes([p for p in listed if "==" in p], args.index_url)
    record = {
        "benchmark": "torch_cost",
        "time": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"machine": platform.machine(), "cores": os.cpu_count()},
        "python": version,
        "torch": torch,
        "index": args.index_url,
        "packages": len(listed),
        "download_bytes": sum(sizes.values()),
        "installed_bytes": installed,
        "torch_and_cuda_bytes": cuda,
        "install_seconds": round(seconds, 1),
        "largest": dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:6]),
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    gib = 2**30
    print(
        f"{torch} on Python {version}: {len(listed)} packages, {record['download_bytes'] / gib:.2f} GiB to download, "
        f"{installed / gib:.2f} GiB installed ({cuda / gib:.2f} GiB torch and CUDA), {seconds:.0f} s -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
