"""Should we take this release: the same checks in a baseline and a candidate environment, gated.

The baseline environment is constraints/default.txt; the candidate is the same with the
packages of `--to NAME==VERSION` changed (companions resolved by the installer, see
harness.environments.envs). In each, through that environment's own interpreter and the checkout's
harness: the differential suite on the same derandomized cases (ci profile, fixed seed and
budget) for every kernel registered on both sides, the TPU compile checks and the
benchmarks, each into that side's store. Then the gate (correctness, paired numerics drift,
compile, memory, speed), one HTML report, and a verdict: SAFE or NOT SAFE, with what and why.

Pure planning (`targets`, `Plan.steps`, `verdict`) is separate from running (`run_side`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from harness.core.errors import InputError
from harness.core.exit_codes import ENTRY
from harness.environments import envs

# The step command exits 0 (all pass) or 1 (a recorded discrepancy or failed compile):
# both leave a complete store. Anything else (2 bad usage, 3 or a crash) means the step
# did not run its checks. As in the noxfile's matrix, a crash is turned into 3 so that it
# never reads as a recorded discrepancy (Python exits 1 on an uncaught exception too).
RECORDED = (0, 1)
HARNESS = ENTRY
KERNELS = "import json; from harness.core import contract; print(json.dumps(contract.names('kernel')))"
VERSIONS = "import json; from harness.core import compat; print(json.dumps(compat.library_versions()))"


class UpgradeError(InputError):
    """Bad usage of upgrade (a malformed --to, a budget below 1): one line, exit 2."""


def targets(specs: list[str], constraints_text: str) -> dict[str, str]:
    """`--to NAME==VERSION` strings as name -> version; each NAME must change a pin of the constraints."""
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
        if pins[name] == f"{m.group(1)}=={version}" or pins[name].split("==")[-1] == version:
            raise UpgradeError(f"--to {spec!r}: the baseline already pins {pins[name]}; give another version")
        out[name] = version
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Budget:
    """How much each side runs: the same on both sides, so that they draw the same cases."""

    kernels: tuple[str, ...] = ()  # empty: every kernel registered on both sides
    examples: int = 3
    seed: int = 0
    compile: bool = True
    compile_shapes: tuple[str, ...] = ()  # empty: the compile command's default shapes
    bench: bool = True
    bench_shapes: tuple[str, ...] = ()  # empty: the bench command's default shapes
    case_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.examples < 1:
            raise UpgradeError(f"--examples={self.examples} must be at least 1")
        if self.case_timeout is not None and self.case_timeout <= 0:
            raise UpgradeError(f"--case-timeout={self.case_timeout} must be positive")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    name: str  # "run", "compile", "bench"
    argv: tuple[str, ...]  # harness arguments


def steps(budget: Budget, kernels: list[str], store: Path) -> list[Step]:
    """The harness commands one side runs, all recording into `store`."""
    run = ["run", "--profile", "ci", "--seed", str(budget.seed), "--examples", str(budget.examples)]
    # One process per side: one run directory whose run.json names the side's versions.
    run += ["--no-database", "--jobs", "1", "--out", str(store)]
    for k in kernels:
        run += ["--kernel", k]
    if budget.case_timeout is not None:
        run += ["--case-timeout", str(budget.case_timeout)]
    out = [Step(name="run", argv=tuple(run))]
    if budget.compile:
        argv = ["compile", "--out", str(store)]
        for s in budget.compile_shapes:
            argv += ["--shape", s]
        out.append(Step(name="compile", argv=tuple(argv)))
    if budget.bench:
        argv = ["bench", "--out", str(store)]
        for s in budget.bench_shapes:
            argv += ["--shape", s]
        out.append(Step(name="bench", argv=tuple(argv)))
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepResult:
    side: str
    name: str
    code: int
    seconds: float
    log: Path
    command: str

    @property
    def ran(self) -> bool:
        return self.code in RECORDED

    def line(self) -> str:
        state = {0: "ok", 1: "ok (recorded failures)"}.get(self.code, f"DID NOT RUN (exit {self.code})")
        return f"  {self.side:<9} {self.name:<8} {state:<24} {self.seconds:7.1f} s  log {self.log}"


def query(env: envs.Env, code: str, *, cwd: Path) -> object:
    """Run a line of Python in the environment and read the JSON it prints."""
    done = subprocess.run([str(env.python), "-c", code], capture_output=True, text=True, cwd=cwd)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise envs.EnvError(f"the {env.spec.label} environment cannot import the harness: {tail}")
    return json.loads(lines[-1])


def run_side(
    side: str, env: envs.Env, plan: list[Step], *, cwd: Path, logs: Path, log: Callable[[str], None] = print
) -> list[StepResult]:
    """Run each step in the environment, output to LOGS/<side>-<step>.log; a step that did not run stops the side."""
    logs.mkdir(parents=True, exist_ok=True)
    out = []
    for step in plan:
        cmd = [str(env.python), "-c", HARNESS, *step.argv]
        path = logs / f"{side}-{step.name}.log"
        start = time.perf_counter()
        with open(path, "w") as f:
            f.write(f"$ {shlex.join([str(env.python), '-m', 'harness', *step.argv])}\n")
            f.flush()
            code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=dict(os.environ)).returncode
        result = StepResult(
            side=side,
            name=step.name,
            code=code,
            seconds=time.perf_counter() - start,
            log=path,
            command=shlex.join([str(env.python), "-m", "harness", *step.argv]),
        )
        log(result.line())
        out.append(result)
        if not result.ran:
            break
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    safe: bool
    headline: str  # the first line of the output and of the report
    reasons: tuple[str, ...]  # what and why, one line each


def verdict(
    *,
    change: str,
    gate_failed: bool,
    gate_reasons: list[str],
    steps: list[StepResult],
    only_baseline: list[str],
) -> Verdict:
    """SAFE only when every step ran on both sides, no kernel was lost, and the gate passed."""
    reasons = []
    for s in steps:
        if not s.ran:
            reasons.append(f"{s.side} {s.name} did not run (exit {s.code}): see {s.log}")
    for k in only_baseline:
        reasons.append(f"kernel {k} is registered in the baseline and not in the candidate")
    reasons += gate_reasons
    if reasons or gate_failed:
        n = len(reasons)
        return Verdict(
            safe=False, headline=f"NOT SAFE: {change} ({n} finding{'s' if n != 1 else ''})", reasons=tuple(reasons)
        )
    return Verdict(safe=True, headline=f"SAFE: {change} (no regression, no drift beyond the limits)", reasons=())
