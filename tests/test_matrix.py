"""The version matrix declaration: parses, one line per cell, covers what the issue asks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from harness.environments import matrix


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def test_declared_matrix_parses_one_cell_per_line() -> None:
    lines = [ln for ln in matrix.MATRIX.splitlines() if ln.split("#", 1)[0].strip()]
    assert len(matrix.CELLS) == len(lines)
    assert len({c.name for c in matrix.CELLS}) == len(matrix.CELLS)


def test_matrix_spans_five_jax_releases_and_two_torch_versions() -> None:
    jaxes = sorted({c.jax for c in matrix.CELLS}, key=_key)
    assert len(jaxes) >= 5
    assert jaxes[0] == "0.7.0"  # the oldest release with pltpu.force_tpu_interpret_mode
    assert len({c.torch for c in matrix.CELLS if c.torch}) >= 2
    for cell in matrix.CELLS:
        if _key(cell.jax) >= (0, 11):
            assert _key(cell.python) >= (3, 12), f"{cell.name}: jax>=0.11 needs Python 3.12"


def test_adding_a_version_is_one_line() -> None:
    cells = matrix.parse(matrix.MATRIX + "3.12      0.13.0    0.0.60.*   -\n")
    assert len(cells) == len(matrix.CELLS) + 1
    assert cells[-1].pins() == ["jax==0.13.0", "jaxlib==0.13.0", "libtpu==0.0.60.*"]


def test_cell_constraints_replace_the_default_pins() -> None:
    cell = matrix.Cell(python="3.11", jax="0.7.0", libtpu="0.0.19.*", torch="2.13.0")
    text = cell.constraints("jax==0.10.2\njaxlib==0.10.2\nnumpy==2.4.6\ntorch==2.13.0\n")
    assert text.splitlines() == ["numpy==2.4.6", "jax==0.7.0", "jaxlib==0.7.0", "libtpu==0.0.19.*", "torch==2.13.0"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param("3.11 0.7.0 0.0.19.*", "expected 4 columns", id="missing-column"),
        pytest.param("3 0.7.0 0.0.19.* -", "must be MAJOR.MINOR", id="bad-python"),
        pytest.param("3.11 0.7.0 0.0.19.* -\n3.11 0.7.0 0.0.19.* -", "declared twice", id="duplicate"),
    ],
)
def test_bad_lines_name_the_problem(line: str, message: str) -> None:
    with pytest.raises(matrix.MatrixError, match=message):
        matrix.parse(line)


def test_run_steps_run_every_kernel_once_with_its_budget_derandomized() -> None:
    kernels = ["jax_xla", "pallas_flash", "pallas_paged"]
    steps = matrix.run_steps(kernels)
    named = [b for step in steps for a, b in zip(step, step[1:], strict=False) if a == "--kernel"]
    assert sorted(named) == sorted(kernels)
    for step in steps:
        assert step[:3] == ["run", "--profile", "ci"] and "--no-database" in step
        assert step[step.index("--jobs") + 1] == "1"  # one run.json per step
        budget = int(step[step.index("--examples") + 1])
        assert all(matrix.EXAMPLES[k] == budget for k in step[step.index("--max-shrinks") + 3 :: 2])


def test_a_kernel_without_a_budget_is_named() -> None:
    with pytest.raises(matrix.MatrixError, match=r"\['new_kernel'\] have no case budget"):
        matrix.run_steps(["jax_xla", "new_kernel"])


def test_the_budgets_are_the_kernels_declarations() -> None:
    # Each adapter declares its budget (About.cases); the GPU- and TPU-only kernels too.
    from harness.core import contract

    declared = {n: i.about.cases for n, i in contract.defined().items() if i.role == "kernel"}
    assert dict(matrix.EXAMPLES) == declared
    assert {"jax_cudnn", "torch_flash", "tokamax_mosaic"} <= set(matrix.EXAMPLES)


def test_run_steps_take_the_budgets_a_cell_lists() -> None:
    # The noxfile reads NAME=CASES in the cell (its own process has no harness dependencies).
    steps = matrix.run_steps({"b": 3, "a": 5, "c": 3})
    assert [s[s.index("--examples") + 1] for s in steps] == ["5", "3"]
    assert steps[1][-4:] == ["--kernel", "b", "--kernel", "c"]
    with pytest.raises(matrix.MatrixError, match=r"\['z'\] have no case budget: declare About\(cases=N\)"):
        matrix.run_steps({"a": 5, "z": 0})


MEASURED = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "matrix_budget.json"


def _cost(cpu_s: list[float], n: int) -> float:
    """CPU seconds of a kernel's first n ci cases: measured ones as measured, the rest at their mean."""
    mean = sum(cpu_s) / len(cpu_s)
    return sum(cpu_s[:n]) + max(0, n - len(cpu_s)) * mean


def _registers(kernel: str, cell: matrix.Cell) -> bool:
    """Whether `kernel` runs in `cell`: kernels/torch_* and kernels/tokamax_* import their framework
    (harness.core.contract.OPTIONAL_FRAMEWORKS), which a cell without that column lacks; a kernel this
    environment lacks (pallas_gpu: jax 0.12.1 removed its module) runs in the other cells only."""
    from harness.core import contract

    framework = kernel.split("_")[0]
    if kernel not in contract.defined() and cell.jax == _default_jax():
        return False
    return framework not in contract.OPTIONAL_FRAMEWORKS or bool(getattr(cell, framework))


def _default_jax() -> str:
    default = (Path(__file__).resolve().parent.parent / "constraints" / "default.txt").read_text()
    return next(ln.split("==")[1].strip() for ln in default.splitlines() if ln.startswith("jax=="))


def _budget(kernel: str, measured: dict) -> int:
    """The kernel's declared budget, or where this environment does not define it, the one it was measured at."""
    return matrix.EXAMPLES[kernel] if kernel in matrix.EXAMPLES else len(measured["kernels"][kernel]["cases"])


def _cell_cpu_s(measured: dict, names: list[str]) -> float:
    """CPU seconds of a cell's runs from a cold smoke cache: each step's start, finding each smoke set, the cases."""
    kernels = {k: measured["kernels"][k] for k in names if measured["kernels"][k]["cpu_s"]}
    steps = matrix.run_steps({k: _budget(k, measured) for k in sorted(names)})
    smoke = sum(v["smoke_cpu_s"] for v in kernels.values())
    cases = sum(_cost(v["cpu_s"], _budget(k, measured)) for k, v in kernels.items())
    return len(steps) * measured["startup_cpu_s"] + smoke + cases


def test_a_cells_runs_fit_the_budget_at_the_measured_cost_per_case() -> None:
    measured = json.loads(MEASURED.read_text())
    # Every kernel the code registers on a CPU is measured: one left out would run in the cells unbudgeted.
    from harness.core import contract

    assert set(contract.names("kernel")) <= set(measured["kernels"])
    cells = {c.name: _cell_cpu_s(measured, [k for k in measured["kernels"] if _registers(k, c)]) for c in matrix.CELLS}
    name, heaviest = max(cells.items(), key=lambda x: x[1])
    assert heaviest <= matrix.RUN_BUDGET_S, f"{name}: {heaviest:.0f} CPU s of runs > {matrix.RUN_BUDGET_S}"
    assert sum(cells.values()) < matrix.MATRIX_BUDGET_S, f"every cell's runs: {sum(cells.values()):.0f} CPU s"


def test_each_budget_holds_the_whole_smoke_set_and_a_drawn_case() -> None:
    # The smoke set exercises every drawn API parameter (harness.core.smoke): a budget that cuts it
    # leaves parameters unexercised in every cell.
    kernels = json.loads(MEASURED.read_text())["kernels"]
    measured = {k: v["smoke_cases"] for k, v in kernels.items() if v["cpu_s"]}
    assert measured, "benchmarks/results/matrix_budget.json measured no kernel"
    short = {
        k: (matrix.EXAMPLES[k], n) for k, n in measured.items() if k in matrix.EXAMPLES and matrix.EXAMPLES[k] <= n
    }
    assert not short, f"budget <= smoke cases (budget, smoke): {short}"


# Draws each kernel's first cases as `python -m harness run --profile ci` does (harness.running.search), without
# running them, and prints their ids.
DRAW = """
from hypothesis import given, settings
from harness.core import contract, profiles, strategies
for name in contract.names("kernel"):
    kernel, ids = contract.resolve(name), []
    test = settings(profiles.get("ci"), max_examples=3, database=None)(given(strategies.cases(kernel))(
        lambda case: ids.append(case.case_id)))
    test.hypothesis.inner_test._hypothesis_internal_add_digest = kernel.name.encode()
    test()
    print(name, *ids)
"""


@pytest.fixture(scope="module")
def cell_stand_ins() -> dict[str, str]:
    """What two stand-ins for cells print, each a process of its own under another hash seed: DRAW, then
    matrix.LIST_KERNELS run as a cell runs it (`python -c CODE [FRAMEWORK ...]`): every kernel in one, the torch
    history cell's in the other. Shared by the tests of both: each process imports every adapter, most of its time."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    root = Path(__file__).resolve().parent.parent
    out = {}
    for seed, frameworks in (("1", ()), ("2", (matrix.TORCH_HISTORY_FRAMEWORK,))):
        code = f"{DRAW}\n{matrix.LIST_KERNELS}"
        cmd = [sys.executable, "-c", code, *frameworks]
        done = subprocess.run(cmd, env={**env, "PYTHONHASHSEED": seed}, cwd=root, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        out[seed] = done.stdout
    return out


def _drawn(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if not ln.startswith(matrix.KERNELS_MARKER)]


def test_cells_with_the_same_capabilities_draw_the_same_cases(cell_stand_ins: dict[str, str]) -> None:
    # Two processes stand in for two cells: the draw must depend on nothing but the kernel's name and
    # capabilities (the hash seed orders frozensets, such as declared mask components, differently).
    lines = _drawn(cell_stand_ins["1"])
    assert len(lines) >= 2 and all(len(ln.split()) == 4 for ln in lines), cell_stand_ins["1"]  # name and 3 ids
    assert lines == _drawn(cell_stand_ins["2"])


def test_history_cells_reach_back_to_jax_0_4_30_and_a_cell_may_have_no_libtpu():
    assert min(matrix.HISTORY_CELLS, key=lambda c: _key(c.jax)).jax == "0.4.30"
    assert all(_key(c.jax) < _key(matrix.CELLS[0].jax) for c in matrix.HISTORY_CELLS)
    (cell,) = matrix.parse("3.11  0.4.30  -  2.13.0\n")
    assert cell.libtpu is None and cell.pins() == ["jax==0.4.30", "jaxlib==0.4.30", "torch==2.13.0"]


TORCH_RELEASES = (
    *("2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"),
)


def test_torch_history_cells_are_torch_releases_from_2_4_beside_the_default_jax() -> None:
    default = (Path(__file__).resolve().parent.parent / "constraints" / "default.txt").read_text()
    jax = next(ln.split("==")[1].strip() for ln in default.splitlines() if ln.startswith("jax=="))
    cells = matrix.TORCH_HISTORY_CELLS
    assert tuple(c.torch for c in cells) == TORCH_RELEASES
    assert {(c.python, c.jax, c.libtpu, c.tokamax) for c in cells} == {("3.12", jax, None, None)}  # torch 2.4: no 3.13
    assert cells[0].pins() == [f"jax=={jax}", f"jaxlib=={jax}", "torch==2.4.1"]
    # The torch pin replaced, libtpu and tokamax left out (none in the cell); numpy 2 and the rest as everywhere.
    changed = set(cells[0].constraints(default).splitlines()) ^ set(default.splitlines())
    assert {ln.split("==")[0] for ln in changed if not ln.startswith("#") and ln.strip()} == {
        "torch",
        "libtpu",
        "tokamax",
    }
    numpy = next(ln for ln in default.splitlines() if ln.startswith("numpy=="))
    assert "torch==2.4.1" in changed and numpy in cells[0].constraints(default).splitlines()


def test_a_torch_history_cell_lists_only_the_torch_kernels_with_their_budgets(cell_stand_ins: dict[str, str]) -> None:
    from harness.core import contract

    every, torch_only = matrix.listed_kernels(cell_stand_ins["1"]), matrix.listed_kernels(cell_stand_ins["2"])
    registry = contract.registry()
    assert torch_only == {n: c for n, c in every.items() if registry[n].framework == "torch"}
    assert "torch_cpu_flash" in torch_only and "pallas_flash" in every and "pallas_flash" not in torch_only
    steps = matrix.run_steps(torch_only)
    assert [a for s in steps for a in s if a in every] == list(torch_only)


def test_a_listing_without_its_marker_is_named() -> None:
    assert matrix.listed_kernels("W: a warning\nkernels: a=3 b=5\n") == {"a": 3, "b": 5}
    with pytest.raises(matrix.MatrixError, match="printed no 'kernels:' line"):
        matrix.listed_kernels("Traceback ...\n")


@pytest.fixture(scope="module")
def matrix_budget() -> types.ModuleType:
    """benchmarks/matrix_budget.py, imported once and shared by the rows: its usage errors are argparse's, the same
    here as in a process of its own, which would import the harness again (a CPU second a row). The checkout it puts
    first on sys.path is taken off again."""
    spec = importlib.util.spec_from_file_location("matrix_budget", MEASURED.parent.parent / "matrix_budget.py")
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "path", list(sys.path))
        spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--update"], id="no-kernel"),
        pytest.param(["--update", "--kernel", "jax_xla", "--examples", "2"], id="another-budget"),
        pytest.param(["--update", "--kernel", "jax_xla", "--out", "missing.json"], id="nothing-to-update"),
    ],
)
def test_a_partial_measurement_names_what_it_needs(matrix_budget, tmp_path, monkeypatch, capsys, args) -> None:
    # benchmarks/matrix_budget.py --update replaces some kernels' rows of a full measurement, at their own budgets.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [matrix_budget.__file__, *args])
    # Past a missed usage error it would measure (for minutes) into the real --out: it stops at the first instead.
    for name in ("measure", "_startup_cpu_s"):
        monkeypatch.setattr(matrix_budget, name, lambda *a: pytest.fail(f"{args}: no usage error, a measurement began"))
    with pytest.raises(SystemExit) as exited:
        matrix_budget.main()
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert "--update needs --kernel, an existing --out to update, and each kernel's own budget" in said
