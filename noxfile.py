"""Sessions: `nox -l` lists them. Each installs what it needs into its own virtualenv."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nox

# uv where nox has it (`pip install nox[uv]`): every environment links the same unpacked wheels (torch's
# CUDA build is 6 GB installed) instead of holding a copy each; else the standard library's venv and pip.
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]
# A session whose interpreter is missing fails, never skips: a skipped session exits 0 having run nothing.
nox.options.error_on_missing_interpreters = True
# Where no interpreter the pins need is installed, nox may download one (uv or pbs-installer, where the
# machine reaches their servers); otherwise the session fails, after the message of _python().
nox.options.download_python = "auto"

ROOT = Path(__file__).parent
DEFAULT_CONSTRAINTS = "constraints/default.txt"
# The previous default (Python 3.11): its version-matrix cell and the other 3.11 cells take their pins from it.
PREVIOUS_CONSTRAINTS = "constraints/previous.txt"
DOCS_CONSTRAINTS = "constraints/docs.txt"
STORE = "reports/store"
# Exit code of a harness command for a discrepancy or a failed compile: the matrix records it
# and goes on. A crash must not pass for one (Python exits 1 on an uncaught exception too),
# so matrix steps run through HARNESS, which turns a crash into 3 (harness.core.exit_codes.EXIT_HARNESS).
RECORDED_FAILURE = 1
CANNOT_RUN = 4


def _load(name: str):  # noqa: ANN202 - a module object
    # By path, without importing the harness package: its dependencies are not installed yet.
    # The modules named here import only the standard library at import time.
    spec = importlib.util.spec_from_file_location(f"_harness_{Path(name).name}", ROOT / "harness" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


PYTHONS = _load("environments/pythons")
MATRIX = _load("environments/matrix")
ENVS = _load("environments/envs")
DEVICES = _load("runtime/devices")
ISA = _load("runtime/isa")
# `python -c HARNESS ...`: the CLI, with a crash (even while importing) exiting 3, never 1.
HARNESS = _load("core/exit_codes").ENTRY


def interpreter(version: str) -> str:
    """The path of an installed interpreter of `version` (harness.environments.pythons.find), else `version`
    itself: nox then tries to download it, and fails the session where it cannot."""
    return PYTHONS.find(version) or version


def _python() -> str:
    """The default sessions' interpreter: the newest Python the default pins install on that this machine has
    (harness.environments.pythons.DEFAULT). Where there is none, the newest of them, which nox downloads where
    it can, after a message naming what to install (the session fails where the download does too)."""
    chosen = PYTHONS.choose()
    if chosen:
        return chosen[1]
    print(f"nox: {PYTHONS.missing()}", file=sys.stderr)
    return PYTHONS.DEFAULT[0]


PYTHON = _python()


@functools.cache
def _uv_sources() -> tuple[str, ...]:
    """Where uv takes packages from: pip's configuration (uv reads none of it), as upgrade's environments do."""
    return ("--index-strategy", "unsafe-best-match", *ENVS.IndexOptions.from_pip(sys.executable).args())


def _install(session: nox.Session, *args: str) -> None:
    """`session.install`, from the package sources pip is configured with whichever installer the session has."""
    session.install(*(_uv_sources() if session.venv_backend == "uv" else ()), *args)


def install(session: nox.Session, *extras: str, constraints: str = DEFAULT_CONSTRAINTS) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    _install(session, "-c", constraints, "-e", spec)


# The default suite on every core (pytest-xdist): one worker per core, each taking the next test when
# it is free (worksteal), since the tests' costs range from milliseconds to a minute.
# `nox -s tests -- -n 0` runs it in one process.
PARALLEL = ("-n", "auto", "--dist", "worksteal")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The harness's own test suite (fast; runs kernels under the TPU interpreter; not slow ones)."""
    # libtpu: the compile-check tests run the real TPU compiler; tokamax: its adapters' tests; fleet: the
    # redis client, so the shared example database's tests run instead of skipping.
    install(session, "test", "tpu", "tokamax", "fleet")
    session.run("ruff", "check", "harness", "kernels", "oracles", "tests", "benchmarks", "noxfile.py")
    session.run(
        "pytest",
        "-m",
        "not slow",
        *PARALLEL,
        *session.posargs,
        env={"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"},
    )


@nox.session(python=PYTHON)
def suite_time(session: nox.Session) -> None:
    """Where the default suite's time goes: runs it as `tests` does and records each test's seconds (minutes)."""
    install(session, "test", "tpu", "tokamax", "fleet")
    session.run("python", "benchmarks/suite_time.py", *session.posargs, env={"JAX_PLATFORMS": "cpu"})


# Runs of the default suite in a row under load: a test that races the machine fails one of them.
STRESS_RUNS = 5
STRESS_BURNERS = 2


@nox.session(python=PYTHON)
def stress(session: nox.Session) -> None:
    """The default suite 5 times beside two CPU-bound processes, then once as a background job of `sh -c`."""
    install(session, "test", "tpu", "tokamax", "fleet")  # what `tests` installs and runs: the same suite, on every core
    env = {"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(STRESS_BURNERS)]
    try:
        for i in range(STRESS_RUNS):
            session.log(f"default suite, run {i + 1} of {STRESS_RUNS}, beside {STRESS_BURNERS} CPU-bound processes")
            session.run("pytest", "-m", "not slow", *PARALLEL, *session.posargs, env=env)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    # A non-interactive shell starts background jobs with SIGINT ignored, as CI agents often do.
    session.log("default suite as a background job of a non-interactive shell")
    # session.run puts the session's bin directory first on PATH, so `pytest` is the session's.
    background = 'pytest -m "not slow" "$@" & wait $!'
    session.run("sh", "-c", background, "sh", *PARALLEL, *session.posargs, env=env, external=True)


# Tests whose draw is unseeded: Hypothesis property tests under default settings (not derandomized)
# and searches under the dev profile with no seed. Each must pass on every draw (issue 25).
UNSEEDED_TESTS = (
    "tests/test_search.py::test_a_failure_is_saved_and_replayed_first_from_the_database",
    "tests/test_search.py::test_the_database_is_per_kernel",
    "tests/test_search.py::test_a_passing_search_prints_nothing_of_hypothesis",
    "tests/test_strategies.py::test_segments_change_where_the_tiles_meet",
    "tests/test_paging.py::test_every_used_page_has_its_own_place_and_the_table_is_not_the_identity",
    "tests/test_paging.py::test_the_sliding_window_mask_is_the_last_w_keys_up_to_each_querys_position",
    "tests/test_strategies.py::test_every_drawn_flash_case_is_inside_its_contract",
    "tests/test_strategies.py::test_segment_runs_cover_the_length",
    "tests/test_strategies.py::test_segments_match_the_sequences",
    "tests/test_strategies.py::test_lengths_q_le_kv_keeps_queries_within_keys",
    "tests/test_strategies.py::test_causal_windows_are_causal_with_an_offset_in_range",
    "tests/test_strategies.py::test_windows_are_bands_with_sides_and_offset_in_range",
    "tests/test_strategies.py::test_soft_cap_and_sinks_are_never_drawn_where_undeclared",
    "tests/test_strategies.py::test_every_drawn_xla_case_is_inside_its_contract",
    "tests/test_strategies_masks.py::test_per_head_masks_have_one_mask_per_query_head",
    "tests/test_strategies_masks.py::test_block_sparse_patterns_cover_the_plane",
    "tests/test_tokamax.py::test_every_drawn_case_is_inside_the_contract",
    "tests/test_pallas_gpu_decode.py::test_every_drawn_case_is_inside_the_contract",
    "tests/test_pallas_paged.py::test_every_drawn_case_is_inside_the_contract",
    "tests/test_pallas_ragged_paged.py::test_every_drawn_case_is_inside_the_contract",
)
FLAKY_RUNS = 30


@nox.session(python=PYTHON)
def flaky(session: nox.Session) -> None:
    """Every test that draws unseeded, 30 times each: one failure in any run is a flaky test (give tests to narrow)."""
    install(session, "test", "tpu", "tokamax")
    env = {"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    targets = session.posargs or list(UNSEEDED_TESTS)
    session.run("pytest", "-m", "not slow", "-p", "tests._repeat", "--repeat", str(FLAKY_RUNS), *targets, env=env)


# The tests that need an upstream module the default jax removed (tests/_removed.py skips them there, naming the
# release): jax 0.12.1 removed the Pallas GPU attention and decode modules, which the previous default has.
REMOVED_MODULE_TESTS = (
    "tests/test_pallas_gpu.py",
    "tests/test_pallas_gpu_decode.py",
    "tests/test_strategies_masks.py::test_every_drawn_case_is_inside_the_contract[pallas_gpu]",
    "tests/test_strategies_masks.py::test_every_declared_mask_component_is_drawn_and_no_other[pallas_gpu]",
    "tests/test_strategies_masks.py::test_pallas_gpu_draws_shared_segments_and_causal_only_with_q_le_kv",
    "tests/test_coverage.py::test_decode_lengths_count_against_the_entry_point_the_adapter_calls",
    "tests/test_pallas.py::test_an_api_this_jax_lacks_is_cannot_run_here_never_a_failure[pallas_gpu]",
    "tests/test_pallas.py::test_a_kernel_registers_exactly_where_the_installed_jax_has_its_module",
    "tests/test_repro.py::test_a_case_the_installed_release_refuses_exits_5",
    "tests/test_repro.py::test_a_refusal_of_the_backward_alone_leaves_a_forward_only_file_replayable",
    "tests/test_findings_fixes.py::test_every_fix_module_imports[pallas_gpu_causal]",
    "tests/test_findings_fixes.py::test_every_fix_module_imports[pallas_gpu_xla_backward]",
    "tests/test_findings_fixes.py::test_every_proven_fix_builds_its_kernels[pallas_gpu_causal_q_longer_than_kv]",
    "tests/test_findings_fixes.py::test_every_proven_fix_builds_its_kernels[pallas_gpu_xla_backward_16bit]",
)
# The newest Python the previous default's pins declare (3.11).
PREVIOUS_PYTHON = PYTHONS.declared((ROOT / PREVIOUS_CONSTRAINTS).read_text())[0]


@nox.session(python=interpreter(PREVIOUS_PYTHON))
def previous(session: nox.Session) -> None:
    """Tests on the previous default (constraints/previous.txt): by default those needing a module today's jax lacks."""
    install(session, "test", constraints=PREVIOUS_CONSTRAINTS)
    env = {"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    targets = session.posargs or list(REMOVED_MODULE_TESTS)
    session.run("pytest", *targets, env=env)


def _pytest(session: nox.Session, *args: str) -> None:
    """pytest on the CPU under the ci profile, the session's arguments after `args`."""
    session.run("pytest", *args, *session.posargs, env={"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"})


# The tests whose results depend on the instruction set XLA's CPU compiler targets: the references
# and rulers, the comparison and the tolerance, and the level detection itself (issue 42).
ISA_TESTS = (
    "tests/test_isa.py",
    "tests/test_jaxvjp.py",
    "tests/test_reference.py",
    "tests/test_extended.py",
    "tests/test_magnitudes.py",
    "tests/test_compare.py",
    "tests/test_oracle_tolerance.py",
)


# The tests whose results depend on the CPU kernels torch dispatches by the host's capability: the torch
# kernels and oracle, the tolerance they are held to, the conventions they probe and the pages generated from
# them (issue 59: a host without AVX-512 took other code paths).
TORCH_ISA_TESTS = (
    "tests/test_torch_cpu_flash.py",
    "tests/test_torch_sdpa.py",
    "tests/test_oracle_tolerance.py",
    "tests/test_conventions.py",
    "tests/test_generate.py",
)


@nox.session(python=PYTHON)
def isa(session: nox.Session) -> None:
    """The ISA-sensitive tests (or those given) under each --xla_cpu_max_isa and torch CPU capability this host has."""
    install(session, "test", "tpu", "tokamax")
    flags = os.environ.get("XLA_FLAGS", "")
    base = {"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    for level in reversed(ISA.host_levels()):
        session.log(f"{ISA.MAX_ISA_FLAG}={level}")
        env = {**base, "XLA_FLAGS": f"{flags} {ISA.MAX_ISA_FLAG}={level}"}
        session.run("pytest", "-m", "not slow", *(session.posargs or ISA_TESTS), env=env)
    for capability in reversed(ISA.host_torch_capabilities()):
        session.log(f"{ISA.TORCH_CAPABILITY_ENV}={capability}")
        env = {**base, ISA.TORCH_CAPABILITY_ENV: capability}
        session.run("pytest", "-m", "not slow", *(session.posargs or TORCH_ISA_TESTS), env=env)


@nox.session(python=PYTHON)
def faults(session: nox.Session) -> None:
    """The whole fault table: drop-ins of real kernels that crash, exit, hang or answer wrong on some calls (slow)."""
    install(session, "test")
    _pytest(session, "tests/test_fault_table.py", "tests/test_faults.py")


@nox.session(python=PYTHON)
def fleet_db(session: nox.Session) -> None:
    """The fleet, slow: two runners share a real redis-server as their example database, killed mid-run (needs
    redis-server); the CI merge job's real steps over the cells' stores."""
    install(session, "test", "fleet")
    _pytest(session, "-m", "slow", "tests/test_fleet_database.py", "tests/test_merge_workflow.py")


@nox.session(python=PYTHON)
def forks(session: nox.Session) -> None:
    """Upstream's later fixes replayed on planted forks of old releases (fork-base; slow: a kernel run per bug)."""
    install(session, "test")
    _pytest(
        session,
        "-m",
        "slow",
        "tests/test_fork_base.py",
        "tests/test_upstream_record.py",
        "tests/test_upstream_candidate.py",
    )


@nox.session(python=PYTHON)
def tutorial(session: nox.Session) -> None:
    """Every command of docs/tutorial.md, run as a reader runs them (minutes: two of them are runs)."""
    install(session, "test")
    _pytest(session, "-m", "slow", "tests/test_tutorial.py")


@nox.session(python=PYTHON)
def planted(session: nox.Session) -> None:
    """Detection power: every planted bug caught under ci, shrunk, and replayed (slow)."""
    install(session, "test")
    _pytest(session, "-m", "slow", "tests/test_planted.py")


@nox.session(python=PYTHON)
def mutation(session: nox.Session) -> None:
    """Mutation testing of the core (mutmut, [tool.mutmut] in pyproject.toml): survivors fail unless documented."""
    install(session, "test", "mutation")
    env = {"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    # mutmut keeps results in mutants/ and reruns only what changed; a fresh run starts clean.
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    session.run("python", "tests/mutation/check.py", "--preflight", env=env)
    session.run("mutmut", "run", "--max-children", str(os.cpu_count() or 2), *session.posargs, env=env)
    session.run("python", "tests/mutation/check.py", env=env)


REQUIRE_TPU = "--require-tpu"


def _has_tpu(session: nox.Session) -> bool:
    """Whether JAX in the session's environment sees a TPU (harness.runtime.devices decides)."""
    out = session.run(
        "python", "-c", "from harness.runtime import devices; print(devices.has_tpu())", silent=True, log=False
    )
    return str(out).strip().splitlines()[-1:] == ["True"]


@nox.session(python=PYTHON)
def tpu(session: nox.Session) -> None:
    """The main job: the differential suite on a TPU, else under the Pallas TPU interpreter."""
    args = [a for a in session.posargs if a != REQUIRE_TPU]
    required = REQUIRE_TPU in session.posargs
    # Before installing anything: a TPU host has /dev/accel* or /dev/vfio.
    if required and not DEVICES.tpu_device_files():
        session.error("--require-tpu: no TPU attached to this host (no /dev/accel* or /dev/vfio)")
    install(session, "tpu", "tokamax")
    on_tpu = _has_tpu(session)
    if required and not on_tpu:
        session.error("--require-tpu: no TPU attached to this host (jax.default_backend() is not 'tpu')")
    if not on_tpu:
        session.log("=" * 78)
        session.log("NO TPU ATTACHED: the kernel runs under the Pallas TPU interpreter on CPU.")
        session.log("Results are recorded with backend 'tpu_interpret'; timings measure the interpreter.")
        session.log("=" * 78)
    session.run("python", "-m", "harness", "run", *args)


@nox.session(python=PYTHON)
def compile(session: nox.Session) -> None:
    """Ahead-of-time TPU compile checks (v4, v5e, v5p, v6e) on any host, recording memory and cost."""
    install(session, "tpu")
    session.run("python", "-m", "harness", "compile", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Speed benchmarks (pytest-benchmark) of the kernel and oracles, recorded with their backend."""
    install(session, "test", "tpu")
    session.run("python", "-m", "harness", "bench", *session.posargs)


def _kernels(session: nox.Session, *frameworks: str) -> dict[str, int]:
    """The kernels that register in the session's environment (harness.core.contract decides), with their budgets;
    only those of `frameworks` where some are named."""
    out = session.run("python", "-c", MATRIX.LIST_KERNELS, *frameworks, silent=True, log=False)
    if out is None:
        return {}  # `nox --install-only`: nox skips every run (the environment is what was asked for)
    try:
        return MATRIX.listed_kernels(str(out))
    except MATRIX.MatrixError as e:
        session.error(str(e))


@nox.session
@nox.parametrize(["python", "cell"], [nox.param(interpreter(c.python), c, id=c.name) for c in MATRIX.CELLS])
def matrix(session: nox.Session, cell) -> None:  # noqa: ANN001 - a harness.environments.matrix.Cell
    """One library-version cell: every kernel that installs there (ci profile), the compile checks, the benchmarks."""
    _run_cell(session, cell)


@nox.session
@nox.parametrize(["python", "cell"], [nox.param(interpreter(c.python), c, id=c.name) for c in MATRIX.HISTORY_CELLS])
def history(session: nox.Session, cell) -> None:  # noqa: ANN001 - a harness.environments.matrix.Cell
    """One release before the TPU interpret mode (jax 0.4.30 to 0.6): as a matrix cell, on the HLO interpreter."""
    _run_cell(session, cell)


@nox.session
@nox.parametrize(
    ["python", "cell"], [nox.param(interpreter(c.python), c, id=c.name) for c in MATRIX.TORCH_HISTORY_CELLS]
)
def torch_history(session: nox.Session, cell) -> None:  # noqa: ANN001 - a harness.environments.matrix.Cell
    """One torch release from 2.4 on beside the default jax: the torch kernels only, installed with uv (CUDA wheels)."""
    _run_cell(session, cell, frameworks=(MATRIX.TORCH_HISTORY_FRAMEWORK,), install=_uv_install)


def _uv_install(session: nox.Session, *args: str) -> None:
    """`uv pip install` into the session's virtualenv: each multi-GB torch wheel is downloaded once into uv's
    cache and linked into every cell. uv reads none of pip's configuration, so pip's index options are given."""
    _install(session, "-c", DEFAULT_CONSTRAINTS, "uv")
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    session.run("uv", "pip", "install", "--python", python, *_uv_sources(), *args)


def _pip_install(session: nox.Session, *args: str) -> None:
    _install(session, *args)


def _run_cell(
    session: nox.Session,
    cell,  # noqa: ANN001 - a harness.environments.matrix.Cell
    *,
    frameworks: tuple[str, ...] = (),
    install=_pip_install,  # noqa: ANN001 - _pip_install or _uv_install
) -> None:
    """A cell's runs: every kernel that registers there (only those of `frameworks` where some are named); for a
    whole cell (no `frameworks`) also the compile checks and the benchmarks."""
    constraints = Path(session.create_tmp()) / "constraints.txt"
    constraints.write_text(cell.constraints(_base_constraints(cell.python)))
    # --no-deps for the project: a cell without torch must not pull it in as a dependency.
    install(session, "-c", str(constraints), "--no-deps", "-e", ".")
    install(session, "-c", str(constraints), *MATRIX.COMMON, *cell.pins())
    session.run("python", "-c", "from harness.runtime import versions; print(versions.library_versions())")
    # Runs go on after a recorded discrepancy (exit 1), so every cell yields all its records;
    # bad usage (2) or a crash stops the cell.
    # 4: a kernel that cannot run in this cell (recorded with its error, harness.core.exit_codes.EXIT_CANNOT_RUN).
    ok = [0, RECORDED_FAILURE, CANNOT_RUN]
    harness = ("python", "-c", HARNESS)
    # Every kernel that registers here, derandomized, with its case budget (harness.environments.matrix.EXAMPLES).
    kernels = _kernels(session, *frameworks)
    steps = MATRIX.run_steps(kernels)
    progress = _Progress(session, cell.name, [int(a[a.index("--examples") + 1]) for a in steps])
    for argv in steps:
        session.run(*harness, *argv, "--out", STORE, *session.posargs, success_codes=ok)
        progress.step_done()
    # The Pallas TPU kernels that register here, compiled for every TPU generation: memory, cost, the
    # trace, lowering and compile times, and the Mosaic kernel bodies they lower to. Not without libtpu.
    compiled = [x for k in ("pallas_flash", "pallas_splash") if k in kernels for x in ("--kernel", k)]
    if cell.libtpu and not frameworks:
        session.run(*harness, "compile", *compiled, "--out", STORE, success_codes=ok)
    if not frameworks:
        session.run(*harness, "bench", "--out", STORE, success_codes=ok)
    # Per cell so far and kernel: the verdict and the API coverage (1: a drawn parameter no case exercised).
    session.run(*harness, "coverage", "--store", STORE, success_codes=[0, RECORDED_FAILURE])


def _base_constraints(python: str) -> str:
    """The pins a cell's other packages take: the default's where it declares the cell's Python, else the previous
    default's (numpy 2.5 needs Python 3.12; the 3.11 cells take numpy 2.4.6 with it)."""
    texts = [(ROOT / path).read_text() for path in (DEFAULT_CONSTRAINTS, PREVIOUS_CONSTRAINTS)]
    return next((t for t in texts if python in PYTHONS.declared(t)), texts[0])


class _Progress:
    """One line after each run step of a cell: steps and cases done of the total, and the time left at the
    pace so far (cases as the unit of work). A log line per step, not a redrawn bar: nox's own process has
    none of the harness's dependencies (the commands inside the cell draw theirs, harness.cli.progress)."""

    def __init__(self, session: nox.Session, name: str, cases: list[int]) -> None:
        self.session, self.name, self.cases, self.done = session, name, cases, 0
        self.start = time.monotonic()

    def step_done(self) -> None:
        self.done += 1
        work, total = sum(self.cases[: self.done]), sum(self.cases)
        spent = time.monotonic() - self.start
        left = spent / work * (total - work) if work else float("nan")
        self.session.log(
            f"{self.name}: run step {self.done}/{len(self.cases)}, {work} of {total} cases, "
            f"{spent / 60:.1f} min so far, about {left / 60:.1f} min of runs left"
        )


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """Render the results store as one self-contained HTML report (default reports/index.html)."""
    install(session)
    # 1 means the report shows failures or regressions; it is written all the same.
    session.run("python", "-m", "harness", "report", *session.posargs, success_codes=[0, 1])


@nox.session(python=PYTHON)
def gate(session: nox.Session) -> None:
    """Gate a candidate's records against a baseline's: fails on a new failure or a regression beyond noise."""
    install(session)
    session.run("python", "-m", "harness", "gate", *session.posargs)


@nox.session(python=PYTHON)
def upgrade(session: nox.Session) -> None:
    """Should we take this release: `-- --to jax==X [--to torch==Y]` runs both sides, gates, writes one report."""
    install(session, "test")  # uv builds the baseline and candidate environments
    # Not safe (1) and cannot tell (4: nothing compared) fail the session, so that CI fails; the
    # report is written all the same. `-- --to torch==2.13.0` (the baseline's own pin) is the control.
    session.run("python", "-m", "harness", "upgrade", *session.posargs)


@nox.session(python=PYTHON)
def watch(session: nox.Session) -> None:
    """Every release of a pinned package newer than its pin, gated by upgrade; one page (reports/watch)."""
    install(session, "test")  # uv builds each release's environment
    # 1 (a release not safe, or one that cannot install) fails the session, so that the scheduled workflow goes
    # red; the page is written all the same.
    session.run("python", "-m", "harness", "watch", *session.posargs)


@nox.session(python=PYTHON)
def findings(session: nox.Session) -> None:
    """Each bug finding's fix proved through the harness: its shrunk case and a short run, fixed and not (minutes)."""
    install(session, "test", "tpu", "tokamax")  # the kernels the fixes edit, tokamax's among them
    env = {"JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    # The catalogue first: a note with malformed metadata fails here (exit 2), before any kernel runs.
    session.run("python", "-c", HARNESS, "findings", "--list", env=env)
    session.run("python", "-m", "docs.findings.fixes.prove", *session.posargs, env=env)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site (docs/, mkdocs.yml) into site/: the kernel table regenerated, then warnings as errors."""
    # The generator reads every kernel's declarations, so the kernels' libraries come too.
    install(session, "tokamax")
    _install(session, "-c", DEFAULT_CONSTRAINTS, "-c", DOCS_CONSTRAINTS, "mkdocs")
    session.run("python", "-m", "docs.generate", env={"JAX_PLATFORMS": "cpu"})
    # --strict: a broken link or anchor, or a page missing from the nav, fails (mkdocs.yml `validation`).
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session(python=PYTHON)
def run_phases(session: nox.Session) -> None:
    """Where a 60-case run's CPU goes by phase, cold and warm cache (benchmarks/results/run_phases.json)."""
    install(session)
    session.run("python", "benchmarks/run_phases.py", *session.posargs, env={"JAX_PLATFORMS": "cpu"})
