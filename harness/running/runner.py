"""Run one case through every subject and compare each with the float64 truth.

Pipeline step two and three: case -> run -> compare. Recording and reporting take the
CaseResult this returns and never see live arrays.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any

import numpy as np

from harness.core import coverage, emptygrads, reference, verdicts
from harness.core.case import Case
from harness.core.compare import Comparison, check_empty_rows, compare, exact_zero, tolerance
from harness.core.contract import GRADIENTS, QUANTITIES, Implementation, Outputs
from harness.core.inputs import NP_DTYPES, Inputs, make_inputs
from harness.core.locate import Located, locate
from harness.core.magnitudes import term_magnitudes
from harness.core.verdicts import Replay
from harness.running import batch, determinism
from harness.running.execute import Execution, execute
from harness.runtime.compat import DEFAULT_INTERPRET, InterpretOptions
from harness.store.derive import reason


@dataclasses.dataclass(kw_only=True)
class SubjectResult:
    """One implementation on one case."""

    implementation: str
    role: str
    backend: str
    empty_rows: str
    passed: bool
    comparisons: list[Comparison]
    error: str | None = None
    traceback: str | None = None
    seconds: float = 0.0
    device: str = "cpu"  # where it computed (harness.runtime.placement)
    native: dict | None = None  # harness.tpu.native.NativeTiming.to_json() on an accelerator
    located: Located | None = None  # where the errors sit, on a failure (harness.core.locate)
    digest: str | None = None  # outputs_digest of what it returned: bit-identical results have equal digests
    interpreter: str | None = None  # which Pallas interpreter computed it (compat.INTERPRETERS); None: none did
    # The same kernel on the same case under the other interpreter, judged against the same truth and
    # against this result's outputs ("<q>[vs faithful]" rows); None when only one interpreter ran.
    shadow: SubjectResult | None = None
    # The checks beyond the comparison with the truth that ran (harness.core.coverage.CHECKS names them).
    checks: list[str] = dataclasses.field(default_factory=list)
    # Runs of the same case after this one failed (harness.core.verdicts): a failure that passes on a
    # replay under its own interpreter is a flaky failure.
    replays: tuple[Replay, ...] = ()
    # What it returned, for the checks run_case makes after it (batch rows alone); dropped by run_case
    # before it returns, so that no result kept by a search holds arrays.
    outputs: Outputs | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def divergence(self) -> bool:
        """An interpreter divergence (harness.core.verdicts): passed here under the faithful interpreter, while
        the fast one (the shadow) ran to completion and failed the same way, bit for bit, on its replay."""
        return self.passed and self.shadow is not None and not self.shadow.passed

    @property
    def flaky(self) -> bool:
        """A failure that passed when replayed under its own interpreter (harness.core.verdicts)."""
        return verdicts.flaky(self.passed, self.interpreter, self.replays, changed=verdicts.changed(self.comparisons))

    @property
    def worst(self) -> Comparison | None:
        """The comparison closest to (or furthest past) its bound."""
        finite = [c for c in self.comparisons if c.bound and np.isfinite(c.bound)]
        bad = [c for c in self.comparisons if not c.passed]
        if bad:
            return bad[0]
        return max(finite, key=lambda c: c.max_abs / c.bound, default=None)

    @property
    def failure(self) -> str | None:
        """One line saying why it failed, or None."""
        if self.passed:
            return None
        return reason(self.error, [(c.quantity, c.max_abs, c.bound, c.note) for c in self.comparisons if not c.passed])


@dataclasses.dataclass
class CaseResult:
    case: Case
    subjects: list[SubjectResult]
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """The kernels' verdict. An oracle outside its tolerance is an oracle finding
        (`oracle_findings`), reported apart and never counted against a kernel."""
        judged = [s for s in self.subjects if s.role != "oracle"] or self.subjects
        return all(s.passed for s in judged)

    @property
    def oracle_findings(self) -> list[SubjectResult]:
        """Oracles outside their own tolerance on this case."""
        return [s for s in self.subjects if s.role == "oracle" and not s.passed]

    @property
    def divergences(self) -> list[SubjectResult]:
        """Kernels whose two interpreters disagreed on this case (SubjectResult.divergence): reported
        apart, like oracle findings; `passed` holds the faithful interpreter's verdict."""
        return [s for s in self.subjects if s.divergence]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Check:
    """What one kernel's cases are checked with, built once per kernel and passed whole: the kernel, its oracles,
    whether the backward pass runs, the Pallas TPU interpreter's options, and the seconds each subject may take
    (None: in this process, unbounded)."""

    kernel: Implementation
    oracles: tuple[Implementation, ...] = ()
    grads: bool = True
    interpret: InterpretOptions = DEFAULT_INTERPRET
    time_limit: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "oracles", tuple(self.oracles))

    @property
    def subjects(self) -> list[Implementation]:
        return [self.kernel, *self.oracles]

    def under(self, interpreter: str | None) -> Check:
        """The same check under `interpreter` (the one a verdict ran on); unchanged for None."""
        return dataclasses.replace(self, interpret=self.interpret.under(interpreter))

    def run(self, case: Case, subjects: list[Implementation] | None = None, **how: Any) -> CaseResult:
        """run_case of `case` with these options, through `subjects` (default: the kernel and its oracles); `how`:
        run_case's policy, smoke and rerun_every."""
        subjects = self.subjects if subjects is None else subjects
        options = {"grads": self.grads, "time_limit": self.time_limit, "interpret": self.interpret}
        return run_case(case, subjects, **options, **how)


@dataclasses.dataclass(frozen=True)
class Reference:
    """What every subject of one case is measured against, computed once per case.

    truth: float64; ruler: the same reference in the case dtype; magnitudes: the size of
    the terms each quantity sums (harness.core.magnitudes), the scale of the tolerance floor.
    """

    truth: Outputs
    ruler: Outputs
    magnitudes: dict[str, float]

    @classmethod
    def compute(cls, case: Case, inputs: Inputs, *, grads: bool) -> Reference:
        """From a zero cotangent on rows that see no key: what each implementation's declared value for
        them adds is its own (harness.core.emptygrads.expected)."""
        inputs = emptygrads.without_cotangent(inputs)
        return cls(
            truth=reference.truth(case, inputs, grads=grads),
            ruler=reference.run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype),
            magnitudes=term_magnitudes(case, inputs),
        )


def _empty_row_checks(
    impl: Implementation, case: Case, inputs: Inputs, got: Outputs, *, grads: bool
) -> list[Comparison]:
    """Rows with no visible key against the declared convention, padded query rows apart where the
    implementation declares another value for them (Implementation.padded_rows); each check's note says
    whether those rows' gradients were judged, and if not why (harness.core.emptygrads)."""
    if not inputs.empty.any():
        return []
    group = case.q_heads // case.kv_heads
    values = np.repeat(inputs.v.astype(np.float64), group, axis=1)
    out = []
    for s in emptygrads.declared(impl, case, inputs.empty):
        c = check_empty_rows(s.convention, got.out, values, s.rows, case.dtype, quantity=s.quantity)
        said = emptygrads.note(s, case, grads=grads)
        out.append(dataclasses.replace(c, note=f"{c.note}; {said}") if said else c)
    return out


def _errors(impl: Implementation, case: Case, inputs: Inputs, got: Outputs, ref: Reference) -> list[Comparison]:
    truth, ruler, mags = emptygrads.expected(impl, case, inputs, ref.truth, ref.ruler, ref.magnitudes)
    empty = inputs.empty
    rows = ~empty if empty.any() else None
    out = [
        compare(
            "out",
            got.out,
            truth.out,
            ruler.out,
            tolerance(case.dtype, "out", impl.name),
            magnitude=mags["out"],
            rows=rows,
        )
    ]
    out += _empty_row_checks(impl, case, inputs, got, grads=got.dq is not None)
    for q in GRADIENTS:
        want = truth.get(q)
        # A forward-only kernel (an inference kernel with no VJP) declares grads=False.
        if want is None or not impl.capabilities.grads:
            continue
        if q == "dbias" and not impl.capabilities.dbias:
            continue
        tol = tolerance(case.dtype, q, impl.name)
        out.append(compare(q, got.get(q), want, ruler.get(q), tol, magnitude=mags[q]))
    out = _on_empty_rows_alone(impl, case, inputs, got, (truth, ruler, mags), out)
    if case.residuals and impl.capabilities.residuals:
        # The logsumexp of a row with no visible key is a kernel's own convention (a mask value's
        # or -inf): judged on rows that see a key, as the output is.
        tol = tolerance(case.dtype, "lse", impl.name)
        out.append(compare("lse", got.lse, truth.lse, ruler.lse, tol, magnitude=mags["lse"], rows=rows))
    return out


def _on_empty_rows_alone(
    impl: Implementation, case: Case, inputs: Inputs, got: Outputs, expected: tuple, comps: list[Comparison]
) -> list[Comparison]:
    """`comps` with each failing gradient said to be wrong on rows that see no key alone, where every failing
    quantity is a gradient whose error is a multiple of those rows' (harness.core.emptygrads.direction): it
    passes once that multiple is taken off."""
    failing = [c for c in comps if not c.passed]
    if not failing or any(c.quantity not in GRADIENTS or got.get(c.quantity) is None for c in failing):
        return comps
    way = emptygrads.direction(impl, case, inputs) if inputs.empty.any() else None
    if way is None:
        return comps
    truth, ruler, mags = expected
    scale = {}
    for c in failing:
        q, u = c.quantity, way.grads.get(c.quantity)
        if u is None or not np.any(u):
            return comps
        with np.errstate(all="ignore"):
            x = float(np.sum((got.get(q) - truth.get(q)) * u) / np.sum(u * u))
        if not np.isfinite(x):
            return comps
        ruled = (ruler.get(q) + x * u).astype(NP_DTYPES[case.dtype]).astype(np.float64)
        tol = tolerance(case.dtype, q, impl.name)
        if not compare(q, got.get(q), truth.get(q) + x * u, ruled, tol, magnitude=mags[q]).passed:
            return comps
        scale[q] = x
    return [_noted(c, way.words(scale[c.quantity])) if c.quantity in scale else c for c in comps]


def _noted(c: Comparison, said: str) -> Comparison:
    return dataclasses.replace(c, note=f"{c.note}; {said}" if c.note else said)


def _bitwise_diff(a: np.ndarray | None, b: np.ndarray | None) -> float:
    """Largest difference between two runs; NaN in both places counts as equal."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else np.inf
    both_nan = np.isnan(a) & np.isnan(b)
    with np.errstate(invalid="ignore"):
        diff = np.where(both_nan, 0.0, np.abs(a - b))
    return float(np.nan_to_num(np.max(diff), nan=np.inf)) if diff.size else 0.0


def _interpreter_checks(ex: Execution) -> list[Comparison]:
    """The interpreter's findings as rows of the error table, each with bound 0."""
    out = []
    if ex.races is not None:
        note = "the interpreter's race detector reported a data race" if ex.races else "no data race"
        out.append(exact_zero("races", float(ex.races), note))
    if ex.reordered is not None:
        # A correct kernel computes every output tile with the same operations whatever the
        # order of its 'parallel' axes, so the two runs must agree exactly (NaN matching NaN).
        diff = max(_bitwise_diff(ex.outputs.get(q), ex.reordered.get(q)) for q in QUANTITIES)
        note = "result depends on the 'parallel' grid order" if diff else "same values under another grid order"
        out.append(exact_zero("grid_order", diff, note))
    return out


def judge(
    impl: Implementation,
    case: Case,
    inputs: Inputs,
    ex: Execution,
    ref: Reference,
    *,
    interpreter: str | None = None,
) -> SubjectResult:
    """Compare an execution with the truth: the pure half of run_subject (`interpreter`: the one that ran it)."""
    meta = {
        "implementation": impl.name,
        "role": impl.role,
        "backend": impl.backend(),
        "device": impl.device(),
        "empty_rows": impl.empty_rows(case),
        "interpreter": interpreter,
    }
    if ex.outputs is None:
        return SubjectResult(
            **meta, passed=False, comparisons=[], error=ex.error, traceback=ex.traceback, seconds=ex.seconds
        )
    comps = _errors(impl, case, inputs, ex.outputs, ref) + _interpreter_checks(ex)
    reran = ex.rerun is not None
    if reran:
        comps.append(determinism.comparison(ex.outputs, ex.rerun, bounds=determinism.bounds(impl, comps)))
    passed = all(c.passed for c in comps)
    located = None if passed else _locate(case, inputs, ex.outputs, ref.truth, comps)
    return SubjectResult(
        **meta,
        passed=passed,
        comparisons=comps,
        seconds=ex.seconds,
        located=located,
        native=ex.native,
        digest=outputs_digest(ex.outputs),
        checks=[determinism.REPRODUCIBLE] if reran else [],
        outputs=ex.outputs,
    )


def outputs_digest(outputs: Outputs) -> str:
    """A hash of every quantity an implementation returned, to the bit (NaN payloads made one).

    Two environments that return the same bits on the same case have the same digest, which the
    records' errors against a truth each side recomputes cannot show (harness.gate.drift).
    """
    h = hashlib.sha256()
    for q in QUANTITIES:
        a = outputs.get(q)
        if a is None:
            continue
        a = np.ascontiguousarray(np.where(np.isnan(a), np.nan, a), dtype=np.float64)
        h.update(f"{q}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:32]


def _locate(case: Case, inputs: Inputs, got: Outputs, truth: Outputs, comps: list[Comparison]) -> Located | None:
    """The failure's errors located from the same arrays and bounds the comparisons used."""
    # The located arrays are [batch, heads, rows, cols]; the per-row logsumexp is reported by its comparison.
    arrays = ("out", *GRADIENTS)
    return locate(
        {q: got.get(q) for q in arrays},
        {q: truth.get(q) for q in arrays},
        {c.quantity: c.bound for c in comps},
        blocks=case.block_dict,
        judged_out=~inputs.empty if inputs.empty.any() else None,
    )


def _execute(
    impl: Implementation,
    case: Case,
    inputs: Inputs,
    *,
    grads: bool,
    time_limit: float | None,
    interpret: InterpretOptions,
    rerun: bool = False,
) -> Execution:
    """Run `impl` (in a worker under a time limit); rerun: once more on fresh copies of the inputs, kept
    as Execution.rerun (harness.running.determinism)."""
    if time_limit is None or impl.role == "oracle":  # the judges stay in this process
        ex = execute(impl, case, inputs, grads=grads, interpret=interpret)
    else:
        from harness.running import worker  # starts a process: only when a time limit asks for one

        ex = worker.execute(impl, case, grads=grads, time_limit=time_limit, interpret=interpret)
    if rerun and ex.outputs is not None:
        kw = {"grads": grads, "time_limit": time_limit, "interpret": interpret}
        again = _execute(impl, case, determinism.fresh(inputs), **kw)
        ex = dataclasses.replace(ex, rerun=again.outputs if again.outputs is not None else str(again.error))
    return ex


def run_subject(
    impl: Implementation,
    case: Case,
    inputs: Inputs,
    ref: Reference,
    *,
    grads: bool,
    time_limit: float | None = None,
    interpret: InterpretOptions = DEFAULT_INTERPRET,
    rerun_every: bool = False,
) -> SubjectResult:
    """Run one implementation; any exception (or, under a time limit, a hang or crash) becomes a failed result.
    rerun_every: rerun every case where reproducibility is declared, not a share (determinism.wanted)."""
    interpreter = interpreter_of(impl, interpret)
    rerun = determinism.wanted(impl, case, interpreter, every=rerun_every)
    ex = _execute(impl, case, inputs, grads=grads, time_limit=time_limit, interpret=interpret, rerun=rerun)
    return judge(impl, case, inputs, ex, ref, interpreter=interpreter)


def interpreter_of(impl: Implementation, interpret: InterpretOptions) -> str | None:
    """The interpreter `impl` runs under with these options; None where none does (native, or not Pallas TPU)."""
    return interpret.interpreter if impl.backend() == "tpu_interpret" else None


# --- Which interpreter runs a case (run --interpreter) ---

INTERPRETER_POLICIES: tuple[str, ...] = ("fast", "faithful", "both")
# Under the "fast" policy, one drawn case in FAITHFUL_ONE_IN (by case id, so the same cases every
# time) runs on the faithful interpreter too, so that the fast interpreter is checked against the
# faithful one on drawn cases, not only where a kernel fails. The faithful interpreter costs ~20x the
# fast one on a reused program (benchmarks/interpreters.py: 0.8 against 0.04 CPU s) and 2x on a new
# one, and a sampled case's program is often new to it. Measured (benchmarks/interpreter_run.py,
# pallas_flash, 60 cases, seed 1): 6 of 55 drawn cases ran on both, their faithful runs 61 s against
# 111 s for the 49 fast-only cases: about half the fast bulk's kernel time, for a comparison of the
# two interpreters on a tenth of the drawn cases besides the smoke cases.
FAITHFUL_ONE_IN = 16


def plan(
    impl: Implementation, case: Case, interpret: InterpretOptions, policy: str | None, *, smoke: bool = False
) -> tuple[str, ...]:
    """The interpreters `impl` runs `case` on, the verdict's last; a failure on "fast" alone is replayed on
    "faithful" afterwards (run_case). policy None: the options' own interpreter, as given."""
    if policy is None or impl.backend() != "tpu_interpret":
        return (interpret.interpreter,)
    if policy not in INTERPRETER_POLICIES:
        raise ValueError(f"interpreter policy {policy!r} is not one of {INTERPRETER_POLICIES}")
    runs_on = impl.interpreters()
    if "fast" not in runs_on or "faithful" not in runs_on:
        return runs_on[-1:] or (interpret.interpreter,)  # the only one it runs under (or its own error)
    if policy == "faithful" or smoke or interpret.checks:
        return ("faithful",)
    if policy == "both" or int(case.case_id, 16) % FAITHFUL_ONE_IN == 0:
        return ("fast", "faithful")
    return ("fast",)


def _vs_faithful(fast: Outputs, faithful: Outputs, verdict: SubjectResult) -> list[Comparison]:
    """The fast interpreter's outputs against the faithful one's, each within the bound `verdict` was
    judged by for that quantity (the same tolerance, never a looser one)."""
    bounds = {c.quantity: c.bound for c in verdict.comparisons}
    out = []
    for q in QUANTITIES:
        a, b = fast.get(q), faithful.get(q)
        if a is None or b is None or q not in bounds:
            continue
        diff = _bitwise_diff(a, b) if a.shape == b.shape else np.inf
        note = "differs from the faithful interpreter" if diff > bounds[q] else "agrees with the faithful interpreter"
        out.append(
            Comparison(
                quantity=f"{q}[vs faithful]",
                max_abs=diff,
                max_rel=diff,
                oracle_abs=0.0,
                ratio=diff / bounds[q] if bounds[q] else np.inf,
                bound=bounds[q],
                passed=diff <= bounds[q],
                note=note,
            )
        )
    return out


def run_interpreted(
    impl: Implementation,
    case: Case,
    inputs: Inputs,
    ref: Reference,
    *,
    grads: bool,
    time_limit: float | None,
    interpret: InterpretOptions,
    interpreters: tuple[str, ...],
    confirm: bool = True,
    rerun_every: bool = False,
) -> SubjectResult:
    """`impl` on each of `interpreters` in turn, and (confirm) on "faithful" after a failure on "fast" alone;
    the verdict is the last run's, with the fast run as its shadow (compared with it) when both ran."""
    runs: dict[str, tuple[Execution, SubjectResult]] = {}
    order = list(interpreters)
    while order:
        name = order.pop(0)
        options = interpret.under(name)
        # A fast-only failure's confirmation reruns too: it may be the fast run's reproducibility that failed.
        every = rerun_every or (name == "faithful" and "fast" in runs)
        rerun = determinism.wanted(impl, case, name, every=every)
        ex = _execute(impl, case, inputs, grads=grads, time_limit=time_limit, interpret=options, rerun=rerun)
        runs[name] = ex, judge(impl, case, inputs, ex, ref, interpreter=name)
        if confirm and name == "fast" and not runs[name][1].passed and "faithful" not in runs and not order:
            order.append("faithful")  # every failure on the fast interpreter is confirmed before it is reported
    if len(runs) == 1:
        return next(iter(runs.values()))[1]
    (fast_ex, fast), (faithful_ex, faithful) = runs["fast"], runs["faithful"]
    if fast_ex.outputs is not None and faithful_ex.outputs is not None:
        extra = _vs_faithful(fast_ex.outputs, faithful_ex.outputs, faithful)
        fast = dataclasses.replace(
            fast, comparisons=fast.comparisons + extra, passed=fast.passed and all(c.passed for c in extra)
        )
    if fast.passed or not faithful.passed:
        return dataclasses.replace(faithful, shadow=fast)
    # Failed under the fast interpreter alone: replayed there, so that only a deterministic numeric
    # disagreement is an interpreter divergence (harness.core.verdicts); a crash, exit, hang or error, or
    # numbers that change on replay, are the kernel's failure (flaky where the replay passed).
    options = interpret.under("fast")
    again_ex = _execute(impl, case, inputs, grads=grads, time_limit=time_limit, interpret=options)
    again = judge(impl, case, inputs, again_ex, ref, interpreter="fast")
    replayed = Replay(interpreter="fast", passed=again.passed, digest=again.digest)
    same = fast_ex.outputs is not None and not again.passed and again.digest == fast.digest
    if same and not (verdicts.changed(fast.comparisons) or verdicts.changed(again.comparisons)):
        return dataclasses.replace(faithful, shadow=dataclasses.replace(fast, replays=(replayed,)))
    confirmed = Replay(interpreter="faithful", passed=True, digest=faithful.digest)
    return dataclasses.replace(fast, replays=(replayed, confirmed))


def replayed(result: CaseResult, check: Check) -> CaseResult:
    """`result` with the check's kernel's failure replayed once under the interpreter that failed it, where it was
    not yet (harness.core.verdicts): a failure that passes on replay is a flaky failure."""
    impl = check.kernel
    index, subject = next((i, s) for i, s in enumerate(result.subjects) if s.implementation == impl.name)
    if subject.passed or any(r.interpreter == subject.interpreter for r in subject.replays):
        return result
    again = check.under(subject.interpreter).run(result.case, [impl]).subjects[0]
    replay = Replay(interpreter=subject.interpreter, passed=again.passed, digest=again.digest)
    subjects = list(result.subjects)
    subjects[index] = dataclasses.replace(subject, replays=(*subject.replays, replay))
    return dataclasses.replace(result, subjects=subjects)


def run_case(
    case: Case,
    subjects: list[Implementation],
    *,
    grads: bool = True,
    time_limit: float | None = None,
    interpret: InterpretOptions = DEFAULT_INTERPRET,
    policy: str | None = None,
    smoke: bool = False,
    rerun_every: bool = False,
) -> CaseResult:
    """Truth (float64), ruler (same dtype), then every subject against them.

    time_limit: seconds per subject; when set, subjects run in a worker process that is
    killed (and restarted for the next subject) when it overruns or dies.
    interpret: the Pallas TPU interpreter's options for every subject it interprets.
    policy: which interpreters run each Pallas TPU kernel (INTERPRETER_POLICIES, see `plan`; smoke: the
    case is a smoke case); None runs each under interpret.interpreter alone.
    rerun_every: rerun every case where a kernel declares reproducible results (else a share:
    harness.running.determinism); each kernel's batch row is also checked alone (harness.running.batch).
    """
    start = time.perf_counter()
    # An oracle runs only inside its declared contract: one that lacks a feature of the case
    # (torch SDPA has no soft cap or sinks) says so in violations() and sits the case out.
    subjects = [s for s in subjects if s.role != "oracle" or not s.violations(case)]
    inputs = make_inputs(case)
    ref = Reference.compute(case, inputs, grads=grads)
    results = []
    for impl in subjects:
        interpreters = plan(impl, case, interpret, policy, smoke=smoke)
        if impl.backend() == "tpu_interpret" and (policy is not None or len(interpreters) > 1):
            results.append(
                run_interpreted(
                    impl,
                    case,
                    inputs,
                    ref,
                    grads=grads,
                    time_limit=time_limit,
                    interpret=interpret,
                    interpreters=interpreters,
                    confirm="faithful" in impl.interpreters(),
                    rerun_every=rerun_every,
                )
            )
        else:
            kw = {"grads": grads, "time_limit": time_limit, "interpret": interpret, "rerun_every": rerun_every}
            results.append(run_subject(impl, case, inputs, ref, **kw))
        results[-1] = batch.checked(
            impl, case, inputs, results[-1], grads=grads, interpret=interpret, time_limit=time_limit
        )
        results[-1] = _checks_done(case, results[-1])
    return CaseResult(case=case, subjects=results, seconds=time.perf_counter() - start)


def _checks_done(case: Case, subject: SubjectResult) -> SubjectResult:
    """`subject` with the case's own checks recorded (coverage.case_checks; the runtime ones, reproducible
    and batch_invariant, are set where they ran) and its arrays dropped: its checks have all run."""
    subject.checks = [*subject.checks, *(c for c in coverage.case_checks(case) if c not in subject.checks)]
    subject.outputs = None
    if subject.shadow is not None:
        subject.shadow.outputs = None
    return subject
