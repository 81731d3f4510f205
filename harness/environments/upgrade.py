"""Should we take this release: the same checks in a baseline and a candidate environment, gated.

The baseline environment is constraints/default.txt; the candidate is the same with the
packages of `--to NAME==VERSION` changed (companions resolved by the installer, see
harness.environments.envs). In each, through that environment's own interpreter and the checkout's
harness: the differential suite on the same derandomized cases (ci profile, fixed seed, each
kernel's smoke set and drawn cases), one process per kernel, the TPU compile checks and the
benchmarks (rounds alternating between the sides), each into that side's store. Every step
runs on both sides whatever another step did. Then the gate (correctness, paired numerics
drift, compile, memory, speed), one HTML report, and a verdict: SAFE, NOT SAFE (the
regressions, each with its evidence) or CANNOT TELL (nothing compared), listing apart the
improvements, what is new, what was not compared and why, and what moved within noise.

Pure planning (`targets`, `steps`, `schedule`) is separate from running (`run_all`); judging what
ran is harness.gate.verdict's (the gate is a layer above). What a side ran is written beside its
store as a `SideRecord` (SIDE_FILE), so that each side can run as its own job and be gated later.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.core.errors import InputError
from harness.core.exit_codes import ENTRY, EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_OK, EXIT_USAGE, PARENT_PID_ENV
from harness.environments import envs, matrix

# A step command exits 0 (all pass), 1 (a recorded discrepancy or failed compile) or 4 (`run`: a
# kernel the interpreter cannot run here, recorded with its error in run.json): each leaves a
# complete store, judged by the gate. Anything else (2 bad usage, 3 or a crash) means the step did
# not run its checks. As in the noxfile's matrix, a crash is turned into 3 so that it never reads
# as a recorded discrepancy (Python exits 1 on an uncaught exception too).
RECORDED = (EXIT_OK, EXIT_FAIL, EXIT_CANNOT_RUN)
HARNESS = ENTRY
# The kernels registered in an environment, each with its declared case budget (About.cases): read there,
# since a kernel whose library the harness's own environment lacks (tokamax) is unknown to this process.
KERNELS = (
    "import json; from harness.core import contract; r = contract.registry(); "
    "print(json.dumps({n: r[n].about.cases for n in contract.names('kernel')}))"
)
VERSIONS = "import json; from harness.runtime import compat; print(json.dumps(compat.library_versions()))"
# Cases per kernel by default: the matrix's budget (the kernel's whole smoke set and at least one
# drawn case, harness.environments.matrix.EXAMPLES) and this many drawn cases more, so that an
# upgrade sees what the kernel's smoke set would and a few larger drawn cases besides, where
# numerics drift shows first. 2: 18 cases a side more than the matrix's 87 on a CPU host; the
# README ("Should we take this release?") gives the cases per kernel and the measured wall time.
EXTRA_DRAWN = 2
# Bench processes per side. The gate judges one sample per process and the speed timings of one
# upgrade as one family (Holm, alpha 0.01): the default benchmarks give 32 timings, and 8 against 8
# processes is the fewest whose smallest p-value (2/12870) passes 0.01/32. Measured: 2 a side, their
# repetitions pooled, judged 5 timings of identical environments slower.
BENCH_ROUNDS = 8
# Compile processes per job a side (as `compile --repeat`, harness.tpu.compile.REPEAT), one per round.
COMPILE_ROUNDS = 5
# The steps that time what they measure: run alone on the machine, in rounds alternating the sides.
TIMED = ("compile", "bench")


class UpgradeError(InputError):
    """Bad usage of upgrade (a malformed --to, a budget below 1): one line, exit 2."""


def targets(specs: list[str], constraints_text: str) -> dict[str, str]:
    """`--to NAME==VERSION` strings as name -> version; each NAME must be pinned in the constraints.

    The baseline's own version is allowed: that "upgrade" is the control, and must come out SAFE.
    """
    if not specs:
        raise UpgradeError("give at least one --to NAME==VERSION, e.g. --to jax==0.9.2")
    pins = envs.pinned(constraints_text)
    out: dict[str, str] = {}
    for spec in specs:
        m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*", spec)
        if not m:
            raise UpgradeError(f"--to {spec!r}: expected NAME==VERSION, e.g. jax==0.9.2")
        name, version = m.group(1).lower().replace("_", "-"), m.group(2)
        if name not in pins:
            raise UpgradeError(f"--to {spec!r}: {name} is not pinned in the constraints; pinned: {', '.join(pins)}")
        if name in out:
            raise UpgradeError(f"--to {spec!r}: {name} is given twice")
        out[name] = version
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Budget:
    """How much each side runs: the same on both sides, so that they draw the same cases."""

    kernels: tuple[str, ...] = ()  # empty: every kernel registered on either side
    examples: int | None = None  # cases per kernel; None: default_examples(kernel)
    seed: int = 0
    compile: bool = True
    compile_shapes: tuple[str, ...] = ()  # empty: the compile command's default shapes
    bench: bool = True
    bench_shapes: tuple[str, ...] = ()  # empty: the bench command's default shapes
    bench_rounds: int = BENCH_ROUNDS  # bench processes per side, interleaved with the other side's
    case_timeout: float | None = None
    # kernel -> About.cases as the environments declare it (KERNELS), ahead of this process's own table.
    declared: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.examples is not None and self.examples < 1:
            raise UpgradeError(f"--examples={self.examples} must be at least 1")
        if self.case_timeout is not None and self.case_timeout <= 0:
            raise UpgradeError(f"--case-timeout={self.case_timeout} must be positive")
        if self.bench_rounds < 1:
            raise UpgradeError(f"--bench-rounds={self.bench_rounds} must be at least 1")

    def to_json(self) -> dict[str, Any]:
        """The options both sides must share (the side files say them; the gate checks they agree)."""
        doc = dataclasses.asdict(self)
        doc.pop("declared")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in doc.items()}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, declared: Mapping[str, int]) -> Budget:
        return cls(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()}, declared=tuple(declared.items())
        )

    def examples_for(self, kernel: str) -> int:
        if self.examples is not None:
            return self.examples
        return default_examples(kernel, declared=dict(self.declared))


def default_examples(kernel: str, *, declared: Mapping[str, int] | None = None) -> int:
    """The default cases of `kernel`: its smoke set and drawn cases (its About.cases, as an environment
    declared it or else matrix.EXAMPLES, plus EXTRA_DRAWN)."""
    if declared and kernel in declared:
        return declared[kernel] + EXTRA_DRAWN
    if kernel not in matrix.EXAMPLES:
        raise UpgradeError(
            f"kernel {kernel} has no default case budget: add it to its adapter's About(cases=N) "
            "(harness.environments.matrix.EXAMPLES reads it) or give --examples N"
        )
    return matrix.EXAMPLES[kernel] + EXTRA_DRAWN


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    name: str  # "run", "compile", "bench"
    argv: tuple[str, ...]  # harness arguments
    kernel: str | None = None  # the kernel a run step checks (one process each: one cannot stop another)
    round: int = 0  # which round of a timed step (repeated, interleaved between the sides: schedule)

    @property
    def label(self) -> str:
        return self.name + (f" {self.kernel}" if self.kernel else "") + (f" #{self.round + 1}" if self.round else "")

    @property
    def key(self) -> tuple[str, str | None]:
        """What the step checks: its result is compared with the other side's step of the same key."""
        return (self.name, self.kernel)


def steps(budget: Budget, kernels: list[str], store: Path) -> list[Step]:
    """The harness commands one side runs, all recording into `store`: a run per kernel, compile, bench."""
    out = []
    for k in kernels:
        argv = ["run", "--profile", "ci", "--seed", str(budget.seed), "--examples", str(budget.examples_for(k))]
        # One worker: one run directory per kernel, whose run.json names the side's versions.
        argv += ["--no-database", "--jobs", "1", "--out", str(store), "--kernel", k]
        if budget.case_timeout is not None:
            argv += ["--case-timeout", str(budget.case_timeout)]
        out.append(Step(name="run", argv=tuple(argv), kernel=k))
    if budget.compile:
        # One fresh process per job a round (--repeat 1), the rounds alternating with the other side's
        # as the benchmarks do: the compile-time rule's samples are processes too.
        argv = ["compile", "--out", str(store), "--repeat", "1"]
        for s in budget.compile_shapes:
            argv += ["--shape", s]
        out += [Step(name="compile", argv=tuple(argv), round=i) for i in range(COMPILE_ROUNDS)]
    if budget.bench:
        argv = ["bench", "--out", str(store)]
        for s in budget.bench_shapes:
            argv += ["--shape", s]
        out += [Step(name="bench", argv=tuple(argv), round=i) for i in range(budget.bench_rounds)]
    return out


def schedule(plans: dict[str, list[Step]]) -> list[tuple[str, Step]]:
    """The order the steps run in: each side's runs in turn, then the compile rounds and the benchmarks,
    each alternating sides.

    Timings taken one side after the other would differ by whatever else the machine did in
    between; alternating rounds (baseline, candidate, baseline, ...) spreads that over both sides.
    Measured: a default `--to jax==0.9.2` with the baseline's one compile step (5 processes per
    job) beside another CPU-bound job and the candidate's alone judged 9 compile-time figures
    better (x0.45 to x0.64) and 4 worse.
    """
    out = [(side, s) for side, plan in plans.items() for s in plan if s.name not in TIMED]
    for name in TIMED:
        rounds = {side: [s for s in plan if s.name == name] for side, plan in plans.items()}
        n = max((len(r) for r in rounds.values()), default=0)
        out += [(side, r[i]) for i in range(n) for side, r in rounds.items() if i < len(r)]
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepResult:
    side: str
    step: Step
    code: int
    seconds: float
    log: Path
    command: str
    runs: tuple[str, ...] = ()  # the run directories it wrote (store/records/<run_id>)

    @property
    def ran(self) -> bool:
        return self.code in RECORDED

    def line(self) -> str:
        state = {0: "ok", 1: "ok (recorded failures)", EXIT_CANNOT_RUN: "ok (cannot run here, recorded)"}
        shown = state.get(self.code, f"DID NOT RUN (exit {self.code})")
        return f"  {self.side:<9} {self.step.label:<28} {shown:<30} {self.seconds:7.1f} s  log {self.log}"

    def last_line(self) -> str:
        """The log's last line: for a step that did not run, usually the error."""
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        return lines[-1][:300] if lines[1:] else "no output"

    def to_json(self, root: Path) -> dict[str, Any]:
        """As a side file holds it: the log relative to the side directory `root` where it lies inside it."""
        log = self.log.relative_to(root) if self.log.is_relative_to(root) else self.log
        step = {
            "name": self.step.name,
            "argv": list(self.step.argv),
            "kernel": self.step.kernel,
            "round": self.step.round,
        }
        return {
            "step": step,
            "code": self.code,
            "seconds": self.seconds,
            "log": str(log),
            "command": self.command,
            "runs": list(self.runs),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, side: str, root: Path) -> StepResult:
        step = Step(**{**doc["step"], "argv": tuple(doc["step"]["argv"])})
        return cls(
            side=side,
            step=step,
            code=doc["code"],
            seconds=doc["seconds"],
            log=root / doc["log"],
            command=doc["command"],
            runs=tuple(doc["runs"]),
        )


SIDES = ("baseline", "candidate")
# Beside a side's store (OUT/<side>/records): what the verdict needs besides the records.
SIDE_FILE = "upgrade-side.json"
SIDE_SCHEMA = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class SideRecord:
    """One side of an upgrade as run (`upgrade --side`, or both in one process): read by the gate."""

    side: str  # one of SIDES
    to: dict[str, str]  # the --to pins (name -> version) the upgrade is for
    budget: dict[str, Any]  # Budget.to_json: the same on both sides
    kernels: dict[str, int]  # registered there (forks asked for included), each with its declared cases
    versions: dict[str, Any]  # its library versions (harness.runtime.compat.library_versions)
    steps: tuple[StepResult, ...]  # in the order they ran

    def write(self, directory: Path) -> Path:
        doc = {"schema": SIDE_SCHEMA, "side": self.side, "to": self.to, "budget": self.budget}
        doc |= {"kernels": self.kernels, "versions": self.versions, "steps": [r.to_json(directory) for r in self.steps]}
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / SIDE_FILE
        path.write_text(json.dumps(doc, indent=1) + "\n")
        return path

    @classmethod
    def read(cls, directory: Path) -> SideRecord:
        """The side file in `directory`; an UpgradeError naming the fix when it is absent, unreadable or newer."""
        path = directory / SIDE_FILE
        try:
            doc = json.loads(path.read_text())
        except OSError:
            raise UpgradeError(
                f"{directory} holds no {SIDE_FILE}: give the --out/<side> directory of "
                "`python -m harness upgrade --side baseline|candidate --to ... --out DIR`"
            ) from None
        except ValueError as e:
            raise UpgradeError(f"{path} is not JSON ({e}): run that side again") from None
        if not isinstance(doc, dict) or doc.get("schema") != SIDE_SCHEMA or doc.get("side") not in SIDES:
            got = doc.get("schema") if isinstance(doc, dict) else None
            raise UpgradeError(f"{path}: schema={got!r}, this harness reads schema {SIDE_SCHEMA}: run that side again")
        steps = tuple(StepResult.from_json(r, side=doc["side"], root=directory) for r in doc["steps"])
        fields = {k: doc[k] for k in ("side", "to", "budget", "kernels", "versions")}
        return cls(**fields, steps=steps)


def query(env: envs.Env, code: str, *, cwd: Path) -> object:
    """Run a line of Python in the environment and read the JSON it prints."""
    done = subprocess.run([str(env.python), "-c", code], capture_output=True, text=True, cwd=cwd, env=envs.side_env())
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise envs.EnvError(f"the {env.spec.label} environment cannot import the harness: {tail}")
    return json.loads(lines[-1])


def _run_dirs(store: Path, kernel: str | None = None) -> set[str]:
    """The run directories in `store`; with `kernel`, those whose run.json names that kernel alone (run
    steps of other kernels write into the same store at the same time, run_all)."""
    records = store / "records"
    dirs = {p.name for p in records.iterdir() if p.is_dir()} if records.is_dir() else set()
    return dirs if kernel is None else {d for d in dirs if _run_kernels(records / d) == [kernel]}


def _run_kernels(run_dir: Path) -> list[str] | None:
    try:
        return json.loads((run_dir / "run.json").read_text()).get("kernels")
    except (OSError, ValueError, AttributeError):
        return None


def cannot_compile(env: envs.Env) -> str | None:
    """Why the environment cannot compile for a TPU (it has no libtpu: the [tpu] extra of its jax could not
    install beside it), or None when it can."""
    try:
        installed = env.installed()
    except OSError:
        return None  # not built by envs.build (no record of what it holds): the compile step finds out
    if "libtpu" in installed:
        return None
    why = next((f"{req} cannot install: {reason}" for req, reason in env.left_out().items() if "tpu" in req), "")
    return f"built without libtpu ({why or 'none installed'})"


def not_run(side: str, step: Step, why: str, *, logs: Path) -> StepResult:
    """A step that cannot run in its side's environment, recorded as not run with why (its log's last line):
    the gate then says it once for the step, instead of once per check it would have made."""
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / f"{side}-{step.label.replace(' #', '-').replace(' ', '-')}.log"
    path.write_text(f"$ python -m harness {shlex.join(step.argv)}  (not run)\nnot run: {why}\n")
    return StepResult(side=side, step=step, code=EXIT_USAGE, seconds=0.0, log=path, command="(not run)")


def run_step(side: str, env: envs.Env, step: Step, *, store: Path, cwd: Path, logs: Path) -> StepResult:
    """Run one step in the environment, its output to LOGS/<side>-<step>.log."""
    logs.mkdir(parents=True, exist_ok=True)
    command = shlex.join([str(env.python), "-m", "harness", *step.argv])
    path = logs / f"{side}-{step.label.replace(' #', '-').replace(' ', '-')}.log"
    before = _run_dirs(store, step.kernel)
    start = time.perf_counter()
    with open(path, "w") as f:
        f.write(f"$ {command}\n")
        f.flush()
        cmd = [str(env.python), "-c", HARNESS, *step.argv]
        # A run step stops (as interrupted) when this process dies, even by SIGTERM or SIGKILL, as a
        # worker of `run --jobs` does (harness.running.worker.die_with_parent), never running on orphaned.
        env = envs.side_env(**{PARENT_PID_ENV: str(os.getpid())})
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=env).returncode
    runs = tuple(sorted(_run_dirs(store, step.kernel) - before))
    return StepResult(
        side=side, step=step, code=code, seconds=time.perf_counter() - start, log=path, command=command, runs=runs
    )


def run_all(
    sides: dict[str, tuple[envs.Env, Path]],
    plans: dict[str, list[Step]],
    *,
    cwd: Path,
    logs: Path | None = None,
    jobs: int = 1,
    log: Callable[[str], None] = print,
) -> list[StepResult]:
    """Every step of every side, in `schedule` order; a step that did not run stops nothing. Logs go to
    `logs`, or with None to each side's store/logs (a side's directory then holds all it ran).

    The run steps go `jobs` at a time, both sides of a kernel side by side (each is `run --jobs 1`:
    one process and its kernel worker, taking turns, about one core); the compile and bench steps
    after them one at a time, alone on the machine, since they time what they measure.
    """
    if jobs < 1:
        raise UpgradeError(f"--jobs={jobs} must be at least 1")
    order = schedule(plans)
    lock = threading.Lock()

    def one(item: tuple[str, Step]) -> StepResult:
        side, step = item
        env, store = sides[side]
        where = store / "logs" if logs is None else logs
        why = cannot_compile(env) if step.name == "compile" else None
        result = (
            not_run(side, step, why, logs=where) if why else run_step(side, env, step, store=store, cwd=cwd, logs=where)
        )
        with lock:
            log(result.line())
        return result

    kernels = list(dict.fromkeys(s.kernel for _, s in order if s.name == "run"))
    runs = sorted((it for it in order if it[1].name == "run"), key=lambda it: kernels.index(it[1].kernel))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = dict(zip(runs, pool.map(one, runs), strict=True))
    done |= {it: one(it) for it in order if it[1].name != "run"}
    return [done[it] for it in order]
