"""benchmarks/device_check.sh, the prepared GPU-host check, run dry on this CPU host: every step, a store, a report."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from harness.core import contract
from harness.store.read import load

ROOT = Path(__file__).resolve().parents[1]


def _dry_kernels() -> list[str]:
    """What a dry run checks, as the registry says: the Pallas GPU kernels where they register (jax 0.12.1 removed
    their modules), else jax_xla."""
    registered = contract.names("kernel")
    return [k for k in ("pallas_gpu", "pallas_gpu_decode") if k in registered] or ["jax_xla"]


def test_the_device_check_runs_dry_end_to_end_and_writes_its_store_and_report(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "device_check.sh"), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    kernels = _dry_kernels()
    assert (tmp_path / "kernels.txt").read_text().split() == ["kernels:", *kernels]
    records = load([tmp_path / "store"])
    assert {r.implementation for r in records.cases if r.role == "kernel"} == set(kernels)
    assert {r.implementation for r in records.benches} >= {kernels[0]}
    assert "PASS" in (tmp_path / "report.log").read_text() and (tmp_path / "report.html").is_file()
    with tarfile.open(tmp_path / "store.tgz") as tar:
        assert any(name.endswith("run.json") for name in tar.getnames())


def test_an_unknown_argument_is_bad_usage(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "device_check.sh"), "--bogus"],
        env={**os.environ, "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "unknown argument --bogus" in proc.stderr
