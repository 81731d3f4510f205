"""The harness as a library for a kernel team's own tests: docs/pytest.md has a complete test file.

    from hypothesis import given
    from harness import api

    FORK = api.kernel("my_fork.attention:flash_attention", like="pallas_flash")

    @given(api.cases(FORK))
    def test_my_fork_matches_the_truth(case):
        api.check(FORK, case)

`cases` draws cases inside the kernel's declared capabilities (harness.core.strategies); `check` runs
one against the float64 truth with the kernel in a worker process (a crash, exit or hang fails the case,
never the test session) and raises `CaseFailure`, an AssertionError whose message is the error table,
where the error sits and, given `out`, the command that replays the failure file it wrote.

The names in __all__ are the stable API; the modules they wrap may move. The package's own
`harness/__init__.py` re-exports the core only (tests/test_layers.py: it sits in the lowest layer, and
this module runs kernels), so import it as `harness.api`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import control
from hypothesis import strategies as st

from harness.core import contract, probes, smoke, strategies, strips, verdicts
from harness.core.case import Case
from harness.core.contract import Implementation
from harness.core.errors import InputError
from harness.core.masks import Mask
from harness.running import probes as worker_probes
from harness.running import runner, worker
from harness.running.failures import write_failure
from harness.running.runner import CaseResult
from harness.runtime.compat import InterpretOptions
from harness.store import bug_views
from harness.store.bug import Found
from harness.store.derive import repro_command

__all__ = [
    "INTERPRETERS",
    "Case",
    "CaseFailure",
    "CaseResult",
    "Implementation",
    "Mask",
    "cases",
    "check",
    "failure_report",
    "kernel",
    "smoke_cases",
]

# Which interpreters run a Pallas TPU kernel off a TPU, as `run --interpreter` (harness.running.runner.plan).
INTERPRETERS = runner.INTERPRETER_POLICIES


class CaseFailure(AssertionError):
    """A kernel's failure on one case: `result` (every comparison), `path` (its failure file, or None) and
    `replay` (the command that replays it, or None); the message is `failure_report(result, path)`."""

    def __init__(self, result: CaseResult, path: Path | None = None) -> None:
        super().__init__(failure_report(result, path))
        self.result = result
        self.path = path
        self.replay = repro_command(str(path)) if path is not None else None


def kernel(spec: str | Implementation, *, like: str | None = None) -> Implementation:
    """The implementation `spec` names: a built-in name ("pallas_flash"), `MODULE:ATTR` (an Implementation,
    or a drop-in function for pallas_flash), or `KERNEL=MODULE:ATTR`; like="jax_xla" is that last form
    written apart (`like="jax_xla"` with "my_fork:attention" is "jax_xla=my_fork:attention")."""
    if isinstance(spec, Implementation):
        if like is not None:
            raise InputError(f"like={like!r} applies to a MODULE:ATTR drop-in, not to {spec.name!r}; drop like")
        return spec
    if like is not None:
        if "=" in spec:
            raise InputError(f"{spec!r} already names the built-in kernel it is like; drop like={like!r}")
        if ":" not in spec:
            raise InputError(f"like={like!r} takes a MODULE:ATTR drop-in function, not {spec!r}")
        spec = f"{like}={spec}"
    try:
        return contract.resolve(spec)
    except InputError:
        raise  # an unknown name or module: its message names what exists
    except Exception as e:  # noqa: BLE001 - importing a MODULE:ATTR drop-in runs its code: bad input
        raise InputError(f"kernel {spec!r} failed to load: {type(e).__name__}: {e}; fix that module") from None


def cases(
    of: str | Implementation,
    *,
    dtypes: Sequence[str] | None = None,
    regimes: Sequence[str] | None = None,
) -> st.SearchStrategy[Case]:
    """Cases inside the kernel's declared capabilities (shapes, heads, dtypes, masks, block sizes, value
    regimes): every one is a case `check` accepts. dtypes and regimes narrow the declared ones."""
    impl = kernel(of)
    kw: dict[str, Any] = {"dtypes": tuple(dtypes) if dtypes is not None else None}
    if regimes is not None:
        kw["regimes"] = tuple(regimes)
    return strategies.cases(impl, **kw)


def smoke_cases(of: str | Implementation) -> list[Case]:
    """The kernel's smoke cases, as `run` checks them first: each declared mask component, tiling class,
    dtype, drawn API parameter and extreme-value regime at the smallest size (harness.core.smoke)."""
    return list(smoke.iter_smoke_cases(kernel(of)))


def check(
    of: str | Implementation,
    case: Case,
    *,
    grads: bool = True,
    interpreter: str = "fast",
    time_limit: float | None = None,
    out: Path | str | None = None,
    smoke: bool = False,
) -> CaseResult:
    """Run `case` through the kernel, in a worker process, and compare it with the float64 truth.

    Returns the result where it passed; raises CaseFailure (an AssertionError carrying the error table)
    where it did not, after one replay under the same interpreter (a failure that passes then is a
    flaky failure, and still fails). out: a directory; a failure writes OUT/failures/<id>.json there,
    which `python -m harness repro` replays, and the message ends with that command. Inside a Hypothesis
    test only the final, shrunk failure writes a file (and is replayed), not each shrink step.
    interpreter: how a Pallas TPU kernel runs off a TPU (INTERPRETERS, `run --interpreter`).
    time_limit: seconds per kernel call before its worker is killed (default: as `run`'s).
    smoke: the case is a smoke case (run on the faithful interpreter, as `run` does).
    """
    __tracebackhide__ = True  # pytest shows the test's own line and this message, not the harness's frames
    impl = kernel(of)
    impl.check(case)  # a ContractError (ValueError) naming each value outside the contract
    if interpreter not in INTERPRETERS:
        raise InputError(f"interpreter={interpreter!r} must be one of {INTERPRETERS}")
    limit = worker.default_time_limit() if time_limit is None else time_limit
    if not limit > 0:
        raise InputError(f"time_limit={time_limit!r} must be a positive number of seconds")
    # The run's interpreter options as `run` sets them (harness.running.session.RunPlan.interpret).
    interpret = InterpretOptions(interpreter="faithful" if interpreter == "faithful" else "fast")
    options = runner.Check(kernel=impl, grads=grads and impl.capabilities.grads, interpret=interpret, time_limit=limit)
    # Kernel code never runs in this process: an adapter's probe goes to a worker too (harness.core.probes).
    with probes.calling(worker_probes.in_worker):
        result = options.run(case, policy=interpreter, smoke=smoke)
        if result.passed:
            return result
        if not _final():
            raise CaseFailure(result)  # a shrink step: Hypothesis only needs to know it failed
        raise _failure(options, result, out)


def _final() -> bool:
    """Whether a failure now is one to report: outside a Hypothesis test, or its final (shrunk) run."""
    if not control.currently_in_test_context():
        return True
    return bool(getattr(control.current_build_context(), "is_final", True))


def _failure(options: runner.Check, result: CaseResult, out: Path | str | None) -> CaseFailure:
    """`result` replayed once under the interpreter that failed it (flaky or not), its failure file
    written under `out` (where given), as the exception to raise."""
    result = runner.replayed(result, options)
    path = None
    if out is not None:
        path = write_failure(Path(out), result, options, search=Found(found_by="harness.api.check").to_json())
    return CaseFailure(result, path)


def failure_report(result: CaseResult, path: Path | str | None = None) -> str:
    """A failed case in words: the verdict and case, each failing implementation's error table and where
    its errors sit, and the replay command of its failure file (`path`)."""
    failing = [s for s in result.subjects if not s.passed]
    flaky = all(s.flaky for s in failing) and bool(failing)
    word = verdicts.Verdict.FLAKY_FAILURE if flaky else verdicts.Verdict.FAILURE
    lines = [f"{word.upper()} {', '.join(s.implementation for s in failing)} on {result.case}"]
    lines += [f"  case id {result.case.case_id}"]
    for s in failing:
        if s.flaky:
            lines.append(f"  {s.implementation}: {verdicts.replay_line(s.interpreter, s.replays)}")
        lines.append(bug_views.error_table(s, result.case.dtype) + strips.appendix(s.located))
    if path is not None:
        lines.append(f"  replay: {repro_command(str(path))}")
    else:
        lines.append("  no failure file: check(..., out=DIR) writes one, and says the command that replays it")
    return "\n".join(lines)
