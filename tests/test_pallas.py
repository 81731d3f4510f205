"""kernels/_pallas.py: what the Pallas adapters share (their own tests run each adapter through it)."""

from __future__ import annotations

import pytest

from kernels._pallas import block_names, divisors, lane_tiles
from tests import _removed


def test_lane_tiles_and_divisors_smallest_first() -> None:
    assert lane_tiles(384) == [128, 384] and lane_tiles(100) == []
    assert divisors(12) == [1, 2, 3, 4, 6, 12]


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        pytest.param({"a": 1, "b": 2}, None, id="exact"),
        pytest.param({"a": 1, "b": 2, "c": 1}, None, id="optional"),
        pytest.param({"a": 1}, "missing ['b'], unknown []", id="missing"),
        pytest.param({"a": 1, "b": 2, "z": 3}, "missing [], unknown ['z']", id="unknown"),
    ],
)
def test_block_names_say_what_is_missing_and_what_is_unknown(blocks: dict, message: str | None) -> None:
    got = block_names(blocks, need=("a", "b"), may=("c",), note="c is a flag")
    if message is None:
        assert got is None
    else:
        assert got == f"blocks must name ['a', 'b'] and may add ['c'] (c is a flag); {message}"


def test_the_interpreters_a_kernel_runs_under_are_probed() -> None:
    from harness.core import contract

    flash = contract.resolve("pallas_flash")
    assert flash.interpreters() == ("fast", "faithful") and flash.fast_refusal() is None


def test_a_kernel_the_hlo_interpreter_cannot_run_is_declared_faithful_only() -> None:
    from harness.runtime import compat
    from kernels.pallas_flash import PallasFlash

    class FaithfulOnly(PallasFlash):
        def run(self, case, inputs, *, grads):
            if compat.interpret_options().interpreter == "fast":
                raise NotImplementedError("no discharge rule for this primitive")
            return super().run(case, inputs, grads=grads)

    kernel = FaithfulOnly(name="faithful_only")
    assert kernel.interpreters() == ("faithful",)
    assert kernel.fast_refusal() == "NotImplementedError: no discharge rule for this primitive"


@pytest.mark.parametrize(
    "kernel",
    [
        # As on jax 0.5.0, whose gpu attention module has no BlockSizes: GpuKernel's probe of the smallest case.
        pytest.param("pallas_gpu", marks=_removed.needs(_removed.GPU_ATTENTION)),
        # The same gap met by TpuKernel's probe under the HLO interpreter: a kernel every jax here registers.
        "pallas_flash",
    ],
)
def test_an_api_this_jax_lacks_is_cannot_run_here_never_a_failure(kernel, monkeypatch, tmp_path, capsys) -> None:
    # An adapter that calls what the installed module lacks: exit 4 with the reason, no failure file.
    import importlib
    import json

    from harness import cli
    from harness.core import probes
    from harness.running import probes as worker_probes
    from harness.runtime import versions
    from kernels import _pallas

    upstream = importlib.import_module(f"kernels.{kernel}").upstream
    monkeypatch.delattr(upstream, "BlockSizes")
    monkeypatch.setattr(_pallas, "_API_GAPS", {})
    monkeypatch.setattr(_pallas, "_GPU_PROBED", set())
    monkeypatch.setattr(_pallas, "_FAST_PROBES", {})
    # The patched module is this process's alone: the probe runs here, not in a worker as the CLI's does.
    monkeypatch.setattr(worker_probes, "in_worker", probes.in_process)
    code = cli.main(["run", "--kernel", kernel, "--examples", "2", "--jobs", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    why = f"the adapter calls an API this jax lacks: AttributeError: module '{upstream.__name__}'"
    assert code == cli.EXIT_CANNOT_RUN, out
    assert f"cannot run here: {why}" in out and "FAIL" not in out
    assert not list(tmp_path.rglob("failures/*"))
    (meta,) = tmp_path.glob("records/*/run.json")
    assert json.loads(meta.read_text())["cannot_run"][kernel].startswith(why)
    # Only such an error is a gap; a kernel's own error is the search's to find.
    assert versions.missing_api(AttributeError("module 'jax.nn' has no attribute 'dot_product_attention'"))
    assert versions.missing_api(AttributeError("'int' object has no attribute 'shape'")) is None
    assert versions.missing_api(RuntimeError("module 'jax' ...")) is None


@pytest.mark.parametrize(
    ("kernel", "module"), [("pallas_gpu", _removed.GPU_ATTENTION), ("pallas_gpu_decode", _removed.GPU_DECODE)]
)
def test_a_kernel_registers_exactly_where_the_installed_jax_has_its_module(kernel, module, tmp_path, capsys) -> None:
    # Where the module is gone (jax 0.12.1 on): cannot run here, exit 4 with the reason, never unknown (2) or a crash.
    from harness import cli
    from harness.core import contract

    if _removed.missing(module) is None:
        assert kernel in contract.registry()
        return
    assert kernel not in contract.registry()
    assert contract.unavailable()[f"kernels.{kernel}"].startswith("this jax release lacks it")
    assert cli.main(["run", "--kernel", kernel, "--examples", "1", "--out", str(tmp_path)]) == cli.EXIT_CANNOT_RUN
    assert f"'{kernel}' cannot run here: its module is not loaded (this jax release lacks it" in capsys.readouterr().err


def test_a_residuals_case_run_again_lowers_nothing_anew() -> None:
    # The logsumexp's residual-saving call is jitted as the public function is: called eagerly, each
    # call traced and lowered the kernel again (0.2-0.3 CPU s a case, paid again by every rerun).
    import jax

    from harness.core import contract
    from harness.core.case import Case
    from harness.core.inputs import make_inputs
    from harness.running.execute import execute
    from harness.runtime import compat

    flash = contract.resolve("pallas_flash")
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=128, residuals=True)
    fast = compat.InterpretOptions(interpreter="fast")
    first = execute(flash, case, make_inputs(case), grads=True, interpret=fast)
    assert first.error is None and first.outputs.lse is not None, first.error
    lowered: list[str] = []

    def listen(event: str, seconds: float, **_: object) -> None:
        if event.endswith("jaxpr_to_mlir_module_duration"):
            lowered.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        again = execute(flash, case, make_inputs(case), grads=True, interpret=fast)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert again.error is None and (again.outputs.lse == first.outputs.lse).all()
    assert lowered == []
