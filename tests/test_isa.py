"""harness.runtime.isa: the level XLA's CPU compiler targets, from /proc/cpuinfo and XLA_FLAGS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtime import isa

ROOT = Path(__file__).resolve().parent.parent

# Real flag sets, trimmed to what decides the level.
NEHALEM = {"fpu", "sse2", "ssse3", "sse4_1", "sse4_2", "popcnt"}
SANDY_BRIDGE = NEHALEM | {"avx"}
HASWELL = SANDY_BRIDGE | {"avx2", "fma", "f16c"}
ZEN4 = HASWELL | {"avx512f", "avx512bw", "avx512vl", "avx512_bf16"}


@pytest.mark.parametrize(
    ("flags", "levels"),
    [
        pytest.param(set(), ("SSE4_2",), id="no-cpuinfo"),
        pytest.param(NEHALEM, ("SSE4_2",), id="nehalem"),
        pytest.param(SANDY_BRIDGE, ("SSE4_2", "AVX"), id="sandy-bridge"),
        pytest.param(HASWELL, ("SSE4_2", "AVX", "AVX2"), id="haswell"),
        pytest.param(ZEN4, ("SSE4_2", "AVX", "AVX2", "AVX512"), id="zen4"),
        pytest.param(ZEN4 - {"avx512f"}, ("SSE4_2", "AVX", "AVX2"), id="avx512-subsets-without-avx512f"),
    ],
)
def test_host_levels_follow_the_cpuinfo_flags(flags, levels) -> None:
    assert isa.host_levels(flags) == levels


@pytest.mark.parametrize(
    ("xla_flags", "cap", "level"),
    [
        pytest.param("", None, "AVX512", id="unset"),
        pytest.param("--xla_cpu_max_isa=AVX2", "AVX2", "AVX2", id="below-the-host"),
        pytest.param("--xla_dump_to=/tmp/x --xla_cpu_max_isa=sse4_2", "SSE4_2", "SSE4_2", id="lower-case"),
        pytest.param("--xla_cpu_max_isa=AVX --xla_cpu_max_isa=AVX2", "AVX2", "AVX2", id="the-last-wins"),
        pytest.param("--xla_cpu_max_isa=AMX", "AMX", "AVX512", id="above-avx512"),
    ],
)
def test_the_level_is_the_hosts_capped_by_xla_flags(xla_flags, cap, level) -> None:
    assert isa.max_isa(xla_flags) == cap
    assert isa.level(ZEN4, xla_flags) == level


def test_a_cap_above_the_host_changes_nothing() -> None:
    assert isa.level(HASWELL, "--xla_cpu_max_isa=AVX512") == "AVX2"


def test_cpuinfo_is_read_from_the_first_processor(tmp_path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert isa.cpu_flags(str(cpuinfo)) == {"fpu", "sse4_2", "avx", "avx2"}
    assert isa.cpu_flags(str(tmp_path / "missing")) == frozenset()


@pytest.mark.parametrize(
    ("recorded", "here", "said"),
    [
        pytest.param(
            {"isa": "AVX512"}, ("AVX2", "AVX512", "AVX2"), "AVX512 -> AVX2 (--xla_cpu_max_isa=AVX2)", id="capped"
        ),
        pytest.param(
            {"isa": "AVX512"}, ("AVX2", "AVX2", None), "AVX512 -> AVX2 (this host's highest, AVX2)", id="host"
        ),
        pytest.param({"isa": "AVX2", "xla_cpu_max_isa": "AVX2"}, ("AVX2", "AVX2", None), None, id="same-level"),
        pytest.param(None, ("AVX2", "AVX2", None), None, id="not-recorded"),
    ],
)
def test_a_replay_at_another_level_is_named(monkeypatch, recorded, here, said) -> None:
    monkeypatch.setattr(isa, "describe", lambda: dict(zip(("isa", "host", "xla_cpu_max_isa"), here, strict=True)))
    assert isa.difference(recorded) == said


_RULER = """
from harness.runtime import compat
compat.default_platforms_env()
from harness.core import reference
from harness.runtime import isa
from harness.core.case import Case
from harness.core.errors import InputError
from harness.core.inputs import make_inputs
case = Case(batch=1, q_heads=1, kv_heads=1, q_len=16, kv_len=16, head_dim=16, dtype="float16", seed=0)
inputs = make_inputs(case)
try:
    reference.run_reference(case, inputs, grads=False, dtype=inputs.q.dtype)
    print("ruler")
except InputError as e:
    print(e)
"""


@pytest.mark.parametrize("level", [pytest.param(level, id=level) for level in isa.host_levels()])
def test_a_float16_ruler_is_computed_or_refused_by_name(level) -> None:
    # jaxlib 0.10.2 compiles no float16 program without F16C: at SSE4_2 the ruler names the setting to
    # change instead of crashing the run (an InputError: exit 2).
    env = {**os.environ, "XLA_FLAGS": f"{isa.MAX_ISA_FLAG}={level}", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _RULER], env=env, capture_output=True, text=True, timeout=300)
    said = done.stdout.strip().splitlines()[-1]
    if level == "SSE4_2":
        assert said.startswith("a float16 case has no ruler here: XLA's CPU compiler"), said
        assert said.endswith("set --xla_cpu_max_isa to AVX or higher"), said
    else:
        assert said == "ruler", done.stderr[-2000:]


def test_torchs_cpu_capabilities_are_those_the_host_has_lowest_first() -> None:
    assert isa.host_torch_capabilities(["sse4_2"]) == ("default",)
    assert isa.host_torch_capabilities(["avx2", "fma"]) == ("default", "avx2")  # an AMD EPYC without AVX-512
    avx512 = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"]
    assert isa.host_torch_capabilities(avx512) == isa.TORCH_CAPABILITIES
    assert isa.host_torch_capabilities(["avx2", "fma", "avx512f"]) == ("default", "avx2")  # F alone is not enough
