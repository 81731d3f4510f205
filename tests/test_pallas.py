"""kernels/_pallas.py: what the Pallas adapters share (their own tests run each adapter through it)."""

from __future__ import annotations

import pytest

from kernels._pallas import block_names, divisors, lane_tiles


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


def test_an_api_this_jax_lacks_is_cannot_run_here_never_a_failure(monkeypatch, tmp_path, capsys) -> None:
    # As on jax 0.5.0, whose gpu attention module has no BlockSizes: exit 4 with the reason, no failure file.
    import json

    from harness import cli
    from harness.core import probes
    from harness.running import probes as worker_probes
    from harness.runtime import versions
    from kernels import _pallas, pallas_gpu

    monkeypatch.delattr(pallas_gpu.upstream, "BlockSizes")
    monkeypatch.setattr(_pallas, "_API_GAPS", {})
    monkeypatch.setattr(_pallas, "_GPU_PROBED", set())
    # The patched module is this process's alone: the probe runs here, not in a worker as the CLI's does.
    monkeypatch.setattr(worker_probes, "in_worker", probes.in_process)
    code = cli.main(["run", "--kernel", "pallas_gpu", "--examples", "2", "--jobs", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    why = "the adapter calls an API this jax lacks: AttributeError: module 'jax.experimental.pallas.ops.gpu.attention'"
    assert code == cli.EXIT_CANNOT_RUN, out
    assert f"cannot run here: {why}" in out and "FAIL" not in out
    assert not list(tmp_path.rglob("failures/*"))
    (meta,) = tmp_path.glob("records/*/run.json")
    assert json.loads(meta.read_text())["cannot_run"]["pallas_gpu"].startswith(why)
    # Only such an error is a gap; a kernel's own error is the search's to find.
    assert versions.missing_api(AttributeError("module 'jax.nn' has no attribute 'dot_product_attention'"))
    assert versions.missing_api(AttributeError("'int' object has no attribute 'shape'")) is None
    assert versions.missing_api(RuntimeError("module 'jax' ...")) is None


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
