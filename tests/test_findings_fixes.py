"""Every proof under docs/findings/fixes/ imports and builds its kernels: a proof that stops importing (a
changed adapter signature) fails the default suite, not only `nox -s findings`."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest

from harness import findings
from harness.core import contract
from harness.core.exit_codes import EXIT_CANNOT_RUN
from tests import _removed

HERE = Path(findings.ROOT) / "docs" / "findings" / "fixes"
# The fixes that edit a kernel whose upstream module a jax release removed, and that module.
NEEDS = {"pallas_gpu_causal": _removed.GPU_ATTENTION, "pallas_gpu_xla_backward": _removed.GPU_ATTENTION}


def _marks(fix: str) -> list[pytest.MarkDecorator]:
    """A parameter about fix module `fix` is skipped where the installed jax lacks the module the fix edits."""
    return [_removed.needs(NEEDS[fix])] if fix in NEEDS else []


FIXES = [pytest.param(p.stem, marks=_marks(p.stem)) for p in sorted(HERE.glob("*.py")) if p.stem != "__init__"]


@pytest.mark.parametrize("name", FIXES)
def test_every_fix_module_imports(name):
    importlib.import_module(f"docs.findings.fixes.{name}")


PROVEN = [f for f in findings.catalogue() if f.fix is not None and f.fix.fixed]


def _module(spec: str) -> str:
    """The fix module's own name in a kernel spec: pallas_gpu_causal of docs.findings.fixes.pallas_gpu_causal:fixed."""
    return spec.rpartition("=")[2].partition(":")[0].rpartition(".")[2]


@pytest.mark.parametrize("finding", [pytest.param(f, marks=_marks(_module(f.fix.fixed)), id=f.name) for f in PROVEN])
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


def test_a_fix_whose_kernels_this_jax_lacks_cannot_run_here_and_runs_no_command(tmp_path, monkeypatch, capsys):
    # As the Pallas GPU fixes on jax 0.12.1, which removed the module they edit: `repro` would exit 2 for them.
    from docs.findings.fixes import prove

    (tmp_path / "gone_fix.py").write_text("import jax.experimental.no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (real,) = [f for f in PROVEN if f.name == "jax_xla_float64_softmax_in_float32"]
    fix = dataclasses.replace(real.fix, fixed="gone_fix:fixed", unfixed="gone_fix:unfixed")
    gone = dataclasses.replace(real, fix=fix)
    monkeypatch.setattr(findings, "catalogue", lambda: [gone])
    monkeypatch.setattr(prove, "_harness", lambda *a: pytest.fail(f"a command ran: {a}"))
    assert prove.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    gap = "ModuleNotFoundError: No module named 'jax.experimental.no_such_module'"
    assert out == [f"{real.name}: gone_fix:fixed", f"  'gone_fix:fixed' cannot run here: {gap}", out[-1]]
    assert out[-1] == f"every fix proved that can run here; cannot run here: {real.name}"
