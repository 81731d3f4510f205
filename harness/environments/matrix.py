"""The library-version matrix: one line per cell. `nox -s matrix` runs every cell.

Each cell is a virtualenv with these exact versions, in which the suite (ci profile: every
kernel that installs there, EXAMPLES cases each), the TPU compile checks and the benchmarks
run, all recording into one store; each run's run.json holds the versions it ran with
(harness.runtime.versions.library_versions) and which parameters of each wrapped API exist there
(api_parameters, harness.core.coverage).

Adding a version is adding a line. A release whose API moved is handled in harness/core
(interpret.py for the interpreters, versions.py, devices.py), never here or elsewhere.

Columns: python, jax (jaxlib is the same release), libtpu (the release jax[tpu] pins; "-": none),
torch ("-": none), and optionally tokamax ("-" or absent: none). Choices, and why:
- MATRIX starts at jax 0.7.0, the oldest release with the TPU interpret mode (the faithful
  interpreter: pltpu.force_tpu_interpret_mode first appears in 0.7.0). HISTORY holds the releases
  before it, back to 0.4.30, where the Pallas TPU kernels run under the HLO interpreter alone
  (harness.runtime.interpret) and a kernel whose module or API the release lacks is left out or
  "cannot run here"; `nox -s history` runs them apart, so that `nox -s matrix` still fits its hour.
- jax[tpu] 0.4.30 to 0.5.0 pin a libtpu-nightly no index serves any more: those cells have no libtpu
  (no compile checks). jax 0.4.30 installs beside numpy 2.4.6 and runs its kernels (measured).
- 0.5.0 is the last release before MHA-2's fix (0.5.1) and before BlockSizes, and the first after
  DEC-2 and NN-1 came in (docs/history.md, "Releases a nox -s history run needs").
- jax 0.11 and later require Python >= 3.12; the default pins (constraints/default.txt) run on 3.12 to
  3.14, and their cell on 3.13. The previous default (jax 0.10.2, torch 2.13.0 on 3.11,
  constraints/previous.txt) stays a cell.
- torch: every cell has the SDPA oracle. 2.13.0 is the CPU build on this project's machines (Python
  3.11); the 3.12 and 3.13 cells take PyPI's CUDA builds, which run on a CPU (about 3.5 GB of downloads,
  6 GB installed: the README's "Two commands" says how to take the CPU-only builds instead).
- TORCH_HISTORY holds torch's releases from 2.4 on, each beside the project's default jax (the
  pins of constraints/default.txt), and `nox -s torch_history` runs only the kernels of framework
  torch there (TORCH_HISTORY_FRAMEWORK): rerunning every jax kernel with each torch release would
  test jax ten times. Its cells are on Python 3.12, the newest that torch 2.4 has wheels for; the
  session installs them with uv, whose cache holds each download once and links it into every
  environment (docs/history-torch.md has the measured disk and time).
- tokamax 0.0.12 needs jax >= 0.9.2 and 0.0.17 jax >= 0.11.1 (their package metadata), so only those
  cells install it; the kernels/tokamax_* adapters register only where it imports
  (harness.core.contract.OPTIONAL_FRAMEWORKS).
This module imports only the standard library: the noxfile loads it before any
dependency is installed.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, Sequence

MATRIX = """
# python  jax       libtpu     torch    tokamax
3.11      0.7.0     0.0.19.*   2.13.0
3.11      0.8.3     0.0.32.*   2.13.0
3.11      0.9.2     0.0.37.*   2.13.0   0.0.12
3.11      0.10.2    0.0.42.*   2.13.0   0.0.12
3.12      0.11.2    0.0.48.*   2.14.1   0.0.17
3.12      0.12.0.1  0.0.50.*   2.15.0   0.0.17
3.13      0.12.1    0.0.52     2.15.0   0.0.17
"""

# The releases before the TPU interpret mode (`nox -s history`); tokamax needs jax >= 0.9.2.
HISTORY = """
# python  jax       libtpu     torch
3.11      0.4.30    -          2.13.0
3.11      0.5.0     -          2.13.0
3.11      0.5.3     0.0.11.*   2.13.0
3.11      0.6.2     0.0.17.*   2.13.0
"""

# torch releases from 2.4 on, the latest patch of each minor, beside the default jax (libtpu: none, no
# compile checks). `nox -s torch_history` runs these cells' torch kernels only.
TORCH_HISTORY = """
# python  jax       libtpu     torch
3.12      0.12.1    -          2.4.1
3.12      0.12.1    -          2.5.1
3.12      0.12.1    -          2.6.0
3.12      0.12.1    -          2.7.1
3.12      0.12.1    -          2.8.0
3.12      0.12.1    -          2.9.1
3.12      0.12.1    -          2.10.0
3.12      0.12.1    -          2.11.0
3.12      0.12.1    -          2.12.1
3.12      0.12.1    -          2.13.0
3.12      0.12.1    -          2.14.1
3.12      0.12.1    -          2.15.0
"""
# The framework (harness.core.contract.Implementation.framework) whose kernels a torch history cell runs.
TORCH_HISTORY_FRAMEWORK = "torch"

# Installed in every cell at the versions of constraints/default.txt, besides the pins above.
# absl-py: jax 0.9.x's Pallas TPU interpreter imports it without declaring it.
COMMON = ("numpy", "ml_dtypes", "hypothesis", "jinja2", "pytest", "pytest-benchmark", "absl-py")
COLUMNS = ("python", "jax", "libtpu", "torch")
OPTIONAL_COLUMNS = ("tokamax",)


# Cases per kernel in every cell: each kernel declares its own (harness.core.contract.About.cases,
# in its adapter). Derandomized (ci), so every cell where a kernel has the same capabilities draws
# the same cases and cells compare case by case (`python -m harness coverage` says which did). Each
# budget holds the kernel's whole smoke set (harness.core.smoke: every mask component, tiling class,
# dtype and drawn API parameter) and at least one drawn case, so every cell exercises the whole
# declared API; chosen from measured CPU seconds per case (benchmarks/matrix_budget.py,
# benchmarks/results/matrix_budget.json) so that a cell's runs fit RUN_BUDGET_S on 2 cores;
# tests/test_matrix.py holds both. Kernels registered only on a GPU or TPU have one too.
class _Budgets(Mapping[str, int]):
    """kernel name -> About.cases of every kernel the code defines, read on first use (this module
    imports only the standard library: the noxfile loads it before any dependency is installed)."""

    @functools.cached_property
    def _table(self) -> dict[str, int]:
        from harness.core import contract

        return {name: impl.about.cases for name, impl in sorted(contract.defined().items()) if impl.role == "kernel"}

    def __getitem__(self, kernel: str) -> int:
        return self._table[kernel]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


EXAMPLES: Mapping[str, int] = _Budgets()
# Shrink candidates per failing kernel: a failure found in a cell is shrunk a little (its failure
# file replays it), without letting one failing kernel take the cell's whole budget.
MAX_SHRINKS = 8
# `nox -s matrix` within about an hour on 2 cores: the kernel runs of every cell together, each cell with
# the kernels that register there (installs, the compile checks and the benchmarks take the rest; see the
# README's version matrix). Measured 2026-12-04: 3223 CPU s from cold smoke caches, 1419 of them finding
# the smoke sets, which a cell's later runs read back from disk (harness.core.smoke.cache_path).
MATRIX_BUDGET_S = 3600
# The CPU seconds of the heaviest cell's runs (one with torch and tokamax: every kernel). 300 until the
# smoke sets paired each option with every dtype (358 measured, 2026-12-02); 400 until pallas_ragged_paged,
# tokamax_mosaic and torch_cpu_flash ran here: 527 measured (benchmarks/matrix_budget.py, 2026-12-04), 244
# of them finding the smoke sets. Every budget is its smoke set and one to three drawn cases: no smaller
# budget keeps every drawn parameter exercised.
RUN_BUDGET_S = 540


class MatrixError(ValueError):
    """A malformed matrix line; the message names the line and what is wrong."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    python: str
    jax: str
    libtpu: str | None
    torch: str | None
    tokamax: str | None = None

    @property
    def name(self) -> str:
        return f"py{self.python}-jax{self.jax}-torch{self.torch or 'none'}"

    def pins(self) -> list[str]:
        """Requirement specifiers for this cell's libraries."""
        out = [f"jax=={self.jax}", f"jaxlib=={self.jax}"] + ([f"libtpu=={self.libtpu}"] if self.libtpu else [])
        out += [f"torch=={self.torch}"] if self.torch else []
        return out + ([f"tokamax=={self.tokamax}"] if self.tokamax else [])

    def constraints(self, default: str) -> str:
        """constraints/default.txt with this cell's libraries pinned instead (for COMMON packages)."""
        pinned = {"jax", "jaxlib", "libtpu", "torch", "tokamax"}
        keep = [ln for ln in default.splitlines() if ln.split("==")[0].strip().lower() not in pinned]
        return "\n".join(keep + self.pins()) + "\n"


def parse(text: str = MATRIX) -> list[Cell]:
    """The cells declared in `text`; raises MatrixError for a bad or duplicate line."""
    cells: list[Cell] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if not len(COLUMNS) <= len(fields) <= len(COLUMNS) + len(OPTIONAL_COLUMNS):
            raise MatrixError(
                f"matrix line {n} {raw.strip()!r}: expected {len(COLUMNS)} columns {COLUMNS}"
                f" and optionally {OPTIONAL_COLUMNS}"
            )
        python, jax, libtpu, torch = fields[: len(COLUMNS)]
        tokamax = fields[len(COLUMNS)] if len(fields) > len(COLUMNS) else "-"
        if python.count(".") != 1 or not all(p.isdigit() for p in python.split(".")):
            raise MatrixError(f"matrix line {n}: python={python!r} must be MAJOR.MINOR, e.g. 3.12")
        cell = Cell(
            python=python,
            jax=jax,
            libtpu=None if libtpu == "-" else libtpu,
            torch=None if torch == "-" else torch,
            tokamax=None if tokamax == "-" else tokamax,
        )
        if any(c.name == cell.name for c in cells):
            raise MatrixError(f"matrix line {n}: cell {cell.name} is declared twice")
        cells.append(cell)
    return cells


CELLS: list[Cell] = parse()
HISTORY_CELLS: list[Cell] = parse(HISTORY)
TORCH_HISTORY_CELLS: list[Cell] = parse(TORCH_HISTORY)
# Each list of cells by the nox session that runs one (`nox -s "<session>(<cell name>)"`): the CI workflows
# generate their job matrices from it (.github/workflows/cells.yml), and `harness merge --expect-cells SESSION`
# names each of its cells whose store is missing or whose job failed.
SESSIONS: dict[str, list[Cell]] = {"matrix": CELLS, "history": HISTORY_CELLS, "torch_history": TORCH_HISTORY_CELLS}


# Run in a cell's environment (`python -c LIST_KERNELS [FRAMEWORK ...]`), it prints the kernels that register
# there, each as NAME=CASES (its declared budget, harness.core.contract.About.cases), only those of the frameworks
# named if any, after this marker on one line: jax may write warnings to the same output.
KERNELS_MARKER = "kernels:"
LIST_KERNELS = (
    "import sys; from harness.core import contract; r = contract.registry(); "
    "ns = [n for n in contract.names('kernel') if r[n].framework in sys.argv[1:] or not sys.argv[1:]]; "
    f"print({KERNELS_MARKER!r}, *(f'{{n}}={{r[n].about.cases}}' for n in ns))"
)


def listed_kernels(out: str) -> dict[str, int]:
    """kernel -> case budget, from what LIST_KERNELS printed (the last marker line); MatrixError without one."""
    lines = [ln for ln in out.splitlines() if ln.startswith(KERNELS_MARKER)]
    if not lines:
        raise MatrixError(f"listing the kernels printed no {KERNELS_MARKER!r} line:\n{out[-2000:]}")
    return {name: int(cases) for name, _, cases in (kv.partition("=") for kv in lines[-1].split()[1:])}


def run_steps(kernels: Sequence[str] | Mapping[str, int]) -> list[list[str]]:
    """The `python -m harness run` arguments that run every kernel in `kernels` (those registered in
    a cell) with its case budget, derandomized: one step per distinct budget, kernels in order.
    A mapping gives each kernel's budget (the noxfile reads them in the cell: About.cases); a
    sequence of names takes them from EXAMPLES."""
    budgets = kernels if isinstance(kernels, Mapping) else {k: EXAMPLES[k] for k in kernels if k in EXAMPLES}
    missing = sorted(k for k in kernels if k not in budgets or budgets[k] < 1)
    if missing:
        raise MatrixError(
            f"kernels {missing} have no case budget: declare About(cases=N) in each adapter (harness.core.contract)"
        )
    steps = []
    for n in sorted(set(budgets[k] for k in kernels), reverse=True):
        chosen = [arg for k in kernels if budgets[k] == n for arg in ("--kernel", k)]
        steps.append(
            [
                "run",
                "--profile",
                "ci",
                "--no-database",
                "--examples",
                str(n),
                # One worker: one run.json per step, which the cell's coverage and report read.
                "--jobs",
                "1",
                "--max-shrinks",
                str(MAX_SHRINKS),
                *chosen,
            ]
        )
    return steps
