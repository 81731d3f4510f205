"""References run on the CPU backend whatever JAX's default device is (harness.runtime.placement).

A CPU host has no accelerator to move the default device to, so the test makes two host
devices and sets the default to the second: every reference array must still land on the
first CPU device, and every kernel array on the default device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import json
    import jax
    jax.config.update("jax_default_device", jax.devices("cpu")[1])

    from harness.core import contract, jaxvjp
    from harness.runtime import placement
    from harness.running import runner
    from harness.core.case import Case
    from harness.core.inputs import make_inputs
    from harness.core.masks import Mask

    seen = []
    as64 = jaxvjp._as64
    def spy(a):
        seen.append(sorted(f"{d.platform}:{d.id}" for d in a.devices()))
        return as64(a)
    jaxvjp._as64 = spy

    case = Case(batch=1, q_heads=2, kv_heads=1, q_len=128, kv_len=128, head_dim=64, dtype="float32",
                mask=Mask(causal="top_left"), bias=True, scale=0.125, regime="normal", seed=3)
    inputs = make_inputs(case)
    # The first truth of a shape is numpy's (harness.core.reference._TRUTH_SEEN), host memory by
    # construction; the second the compiled reference's, whose arrays this checks.
    runner.Reference.compute(case, inputs, grads=True)
    seen.clear()
    runner.Reference.compute(case, inputs, grads=True)
    references = list(seen)
    seen.clear()
    # Each implementation from its own module: the whole registry would import every kernel (tokamax: seconds).
    oracle = contract.resolve("jax_reference")
    oracle.run(case, inputs, grads=True)
    oracle_arrays = list(seen)
    seen.clear()
    import kernels.xla_attention  # registers jax_xla, which no module of its own name holds
    kernel = contract.resolve("jax_xla")
    kernel.run(case, inputs, grads=True)
    print(json.dumps({
        "references": references, "oracle": oracle_arrays, "kernel": seen,
        "reference_device": placement.describe(placement.reference_device()),
        "kernel_device": placement.describe(placement.kernel_device()),
        "oracle_record": oracle.device(), "kernel_record": kernel.device(),
    }))
    """
)


def test_references_stay_on_the_cpu_when_the_default_device_is_elsewhere() -> None:
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # truth (out, dq, dk, dv, dbias) and ruler: ten arrays, all on the reference device.
    assert len(got["references"]) == 10
    assert all(devices == ["cpu:0"] for devices in got["references"]), got["references"]
    assert got["oracle"] and all(devices == ["cpu:0"] for devices in got["oracle"]), got["oracle"]
    # The kernel follows the default device, so the test really moved it.
    assert got["kernel"] and all(devices == ["cpu:1"] for devices in got["kernel"]), got["kernel"]
    assert (got["reference_device"], got["kernel_device"]) == ("cpu:0", "cpu:1")
    assert (got["oracle_record"], got["kernel_record"]) == ("cpu:0", "cpu:1")
