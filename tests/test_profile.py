"""`harness profile` (harness.tpu.profile): a jax.profiler trace per kernel, shape and pass, whose Chrome
trace a person opens in Perfetto; the test opens it and finds the kernel and the harness's phases."""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main
from harness.tpu import profile


def _run_json(out: Path) -> dict:
    (path,) = out.glob("records/*/run.json")
    return json.loads(path.read_text())


def test_profile_writes_a_trace_holding_the_kernel_and_the_phases_in_order(tmp_path: Path, capsys) -> None:
    assert main(["profile", "--shape", "mha_f32_256", "--pass", "fwd", "--out", str(tmp_path)]) == 0
    assert "Pallas TPU interpreter on CPU" in capsys.readouterr().out
    (trace,) = _run_json(tmp_path)["traces"]
    assert trace["implementation"] == "pallas_flash" and trace["backend"] == "tpu_interpret" and trace["error"] is None
    files = [Path(f) for f in trace["files"]]
    assert sorted(f.name.split(".", 1)[1] for f in files) == ["trace.json.gz", "xplane.pb"]
    assert all(f.is_file() and f.is_relative_to(tmp_path / "traces") for f in files)

    events = profile.trace_events(next(f for f in files if f.name.endswith(".trace.json.gz")))
    spans = {e["name"]: e for e in events if e.get("ph") == "X"}
    job = spans["pallas_flash fwd mha_f32_256"]
    phases = [spans[f"harness.{p}"] for p in profile.PHASES]
    # Each phase inside the job's scope, one after the other.
    assert all(job["ts"] <= p["ts"] and p["ts"] + p["dur"] <= job["ts"] + job["dur"] for p in phases)
    assert [p["ts"] for p in phases] == sorted(p["ts"] for p in phases)
    # The kernel by its function (jax traces it while compiling) and by its Mosaic name (on every scope).
    compile_ = spans["harness.compile"]
    kernel = [e for e in events if e.get("name") == "PjitFunction(flash_attention)"]
    assert kernel and all(compile_["ts"] <= e["ts"] <= compile_["ts"] + compile_["dur"] for e in kernel)
    if "mosaic_kernels" in spans["harness.call"]["args"]:  # named where libtpu lowers it for a TPU
        assert spans["harness.call"]["args"]["mosaic_kernels"] == "_flash_attention_kernel"
