"""Every proof under docs/findings/fixes/ imports and builds its kernels: a proof that stops importing (a
changed adapter signature) fails the default suite, not only `nox -s findings`."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from harness import findings
from harness.core import contract
from harness.core.exit_codes import EXIT_CANNOT_RUN

HERE = Path(findings.ROOT) / "docs" / "findings" / "fixes"
FIXES = sorted(p.stem for p in HERE.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", FIXES)
def test_every_fix_module_imports(name):
    importlib.import_module(f"docs.findings.fixes.{name}")


PROVEN = [f for f in findings.catalogue() if f.fix is not None and f.fix.fixed]


@pytest.mark.parametrize("finding", PROVEN, ids=lambda f: f.name)
def test_every_proven_fix_builds_its_kernels(finding):
    for spec in (finding.fix.fixed, finding.fix.unfixed):
        assert contract.resolve(spec).role == "kernel", spec


def _steps(name):
    from docs.findings.fixes import prove

    (finding,) = [f for f in PROVEN if f.name == name]
    return prove.commands(finding, Path("/out"))


def test_a_kernel_fix_is_proved_by_four_commands_in_this_environment():
    steps = _steps("jax_xla_float64_softmax_in_float32")
    assert [(s.name, s.want, s.env) for s in steps] == [
        ("repro unfixed", 1, {}),
        ("repro fixed", 0, {}),
        ("run fixed", 0, {}),
        ("run unfixed", 1, {}),
    ]
    assert steps[1].args[-2:] == ["--kernel", "docs.findings.fixes.xla_float64_softmax:fixed"]


def test_a_run_that_passes_unfixed_is_not_made():
    steps = _steps("pallas_ragged_paged_empty_sequence")
    assert [s.name for s in steps] == ["repro unfixed", "repro fixed", "run fixed"]


def test_the_interpreter_fix_is_proved_with_its_switch_off_on_the_unfixed_side():
    from kernels import _tpu_interpret_fix as interpret_fix

    off = {interpret_fix.SWITCH: interpret_fix.OFF}
    steps = _steps("pallas_ragged_paged_interpreter")
    assert [(s.name, s.want, s.env) for s in steps] == [
        ("repro unfixed", 1, off),
        ("repro fixed", 0, {}),
        ("run fixed", 0, {}),
        ("run unfixed", EXIT_CANNOT_RUN, off),
    ]
    assert all("pallas_ragged_paged" in s.args for s in steps[1:])
