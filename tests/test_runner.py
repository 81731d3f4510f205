"""Fault isolation and interpreter checks: every fault is a failed result of its case, never a crash."""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from harness.core import contract, reference
from harness.core.case import Case
from harness.core.compare import Comparison
from harness.core.inputs import make_inputs
from harness.core.masks import Lengths, Mask
from harness.running.runner import run_case
from harness.runtime import compat, interpret
from kernels.pallas_flash import uniform_blocks
from oracles import jax_reference
from tests import _fakes
from tests._fakes import small_case
from tests._racy import racy
from tests.planted import spec

FLASH_BLOCKS = uniform_blocks()


def test_an_exception_is_a_failed_result_and_resets_the_interpreter(monkeypatch):
    resets = []
    monkeypatch.setattr(interpret, "reset_tpu_interpreter", lambda: resets.append(1))
    result = run_case(_fakes.small_case(), [_fakes.RAISES, _fakes.CORRECT], grads=False)
    raised, after = result.subjects
    assert not raised.passed and raised.error.startswith("RuntimeError: planted failure")
    assert "Traceback" in raised.traceback
    assert resets == [1]
    assert after.passed  # the next implementation still runs


def test_nan_where_the_truth_is_finite_fails():
    result = run_case(_fakes.small_case(), [_fakes.NAN], grads=False)
    (s,) = result.subjects
    assert not s.passed
    assert "non-finite" in s.comparisons[0].note


def test_a_hang_is_stopped_by_the_time_limit_and_the_case_goes_on():
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, blocks=FLASH_BLOCKS)
    hang = contract.resolve(spec("hang"))
    result = run_case(case, [hang, _fakes.CORRECT], grads=False, time_limit=5)
    hung, after = result.subjects
    assert not hung.passed and hung.error.startswith("TimeoutError")
    assert 5 <= hung.seconds < 60
    assert after.passed, after.failure  # a fresh worker ran the next implementation


class RacyKernel(_fakes.FakeKernel):
    """Runs the racy Pallas kernel under the interpreter, then answers correctly."""

    def run(self, case, inputs, *, grads):
        with compat.tpu_kernel_context():
            jax.block_until_ready(racy(jnp.ones((8, 128), jnp.float32)))
        return reference.run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)


RACY = RacyKernel("tests.test_runner:RACY", backend="tpu_interpret")


@pytest.mark.parametrize("detect", [False, True])
def test_a_race_fails_the_case_only_with_race_detection(detect):
    options = compat.InterpretOptions(detect_races=detect)
    (s,) = run_case(_fakes.small_case(), [RACY], grads=False, interpret=options).subjects
    races = [c for c in s.comparisons if c.quantity == "races"]
    if detect:
        assert not s.passed and races and not races[0].passed
    else:
        assert s.passed and not races


def _oob_copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


class OutOfBoundsKernel(_fakes.FakeKernel):
    """Reads block 2 of an input that has two blocks, then would answer correctly."""

    def run(self, case, inputs, *, grads):
        x = jnp.ones((16, 128), jnp.float32)
        with compat.tpu_kernel_context():
            read = pl.pallas_call(
                _oob_copy_kernel,
                out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
                grid=(1,),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 2, 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            )
            jax.block_until_ready(read(x))
        return reference.run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)


def test_an_out_of_bounds_read_fails_the_case_and_names_itself():
    oob = OutOfBoundsKernel("tests.test_runner:OOB", backend="tpu_interpret")
    s, after = run_case(_fakes.small_case(), [oob, RACY], grads=False).subjects
    assert not s.passed
    assert "Out-of-bounds block index" in s.error
    assert after.passed, after.failure  # the interpreter was reset: the next interpreted kernel runs


@pytest.mark.parametrize("name, depends", [("pallas_flash", False), (spec("fwd_kv_axis_parallel"), True)])
def test_a_result_that_depends_on_grid_order_fails(name, depends):
    # Four key tiles, so the planted kernel's 'parallel' key axis has an order to get wrong
    # (seeds 1 and 2 permute them differently; with two tiles they may coincide).
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=512, head_dim=64, blocks=FLASH_BLOCKS)
    options = compat.InterpretOptions(random_seed=1, check_grid_order=True)
    (s,) = run_case(case, [contract.resolve(name)], grads=False, interpret=options).subjects
    (grid,) = [c for c in s.comparisons if c.quantity == "grid_order"]
    assert grid.passed is not depends
    assert (grid.max_abs > 0) is depends
    if not depends:
        assert s.passed


def test_interpret_options_reject_bad_values():
    with pytest.raises(ValueError, match="uninitialized_memory"):
        compat.InterpretOptions(uninitialized_memory="garbage")
    with pytest.raises(ValueError, match="random_seed"):
        compat.InterpretOptions(random_seed=-1)
    assert compat.InterpretOptions.from_json(compat.InterpretOptions(random_seed=3).to_json()).random_seed == 3


@pytest.mark.parametrize("time_limit", [None, 300.0], ids=["in-process", "worker"])
def test_an_interrupt_inside_a_host_callback_is_an_interrupt_never_a_kernel_result(time_limit):
    from harness.running import worker
    from harness.running.runner import Reference, run_subject
    from tests.fixtures.misbehaving import INTERRUPTED_IN_CALLBACK

    case = small_case()
    inputs = make_inputs(case)
    ref = Reference.compute(case, inputs, grads=False)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_subject(INTERRUPTED_IN_CALLBACK, case, inputs, ref, grads=False, time_limit=time_limit)
    finally:
        worker.shutdown()


class _Residuals(jax_reference.JaxReference):
    """The reference as a kernel whose logsumexp, or whose padded rows, are off by `shift`."""

    role = "kernel"

    def __init__(self, name: str, *, lse_shift: float = 0.0, padded: str = "zeros") -> None:
        self.name, self.lse_shift, self.padded = name, lse_shift, padded

    def padded_rows(self, case):
        return self.padded

    def run(self, case, inputs, *, grads):
        got = super().run(case, inputs, grads=grads)
        return dataclasses.replace(got, lse=None if got.lse is None else got.lse + self.lse_shift)


RESIDUAL_CASE = Case(
    batch=2,
    q_heads=2,
    kv_heads=1,
    q_len=8,
    kv_len=8,
    head_dim=4,
    residuals=True,
    soft_cap=2.0,
    sinks=True,
    mask=Mask(lengths=Lengths(q=(5, 8))),
)


def test_the_logsumexp_residual_is_checked_against_the_truth():
    good, bad = run_case(RESIDUAL_CASE, [_Residuals("good"), _Residuals("bad", lse_shift=1e-4)], grads=False).subjects
    assert good.passed, good.failure
    assert [c.quantity for c in bad.comparisons if not c.passed] == ["lse"]


def test_padded_query_rows_are_held_to_their_own_declaration():
    # The reference gives padded rows 0 (with sinks every empty row is 0): declared "uniform" they fail.
    good, bad = run_case(RESIDUAL_CASE, [_Residuals("zeros"), _Residuals("uniform", padded="uniform")]).subjects
    assert good.passed, good.failure
    assert [c.quantity for c in bad.comparisons if not c.passed] == ["out[padded]"]


def test_an_oracle_outside_its_contract_sits_the_case_out():
    # torch SDPA has no soft cap or sinks: it is not run, rather than failing.
    torch_sdpa = contract.resolve("torch_sdpa")
    assert torch_sdpa.violations(RESIDUAL_CASE)
    result = run_case(RESIDUAL_CASE, [_Residuals("kernel"), torch_sdpa], grads=False)
    assert [s.implementation for s in result.subjects] == ["kernel"]


class InterpreterFake(_fakes.FakeKernel):
    """A Pallas TPU kernel stand-in that answers wrong (x1.01) under the interpreters in `wrong_under`."""

    def __init__(self, name, *, wrong_under=(), runs_on=("fast", "faithful"), raises_under=(), faulty_calls=None):
        super().__init__(name, backend="tpu_interpret")
        self.wrong_under, self.runs_on, self.ran = wrong_under, runs_on, []
        self.raises_under = raises_under
        self.faulty_calls = faulty_calls  # None: every call under those interpreters; else these call numbers

    def interpreters(self):
        return self.runs_on

    def run(self, case, inputs, *, grads):
        name = compat.interpret_options().interpreter
        self.ran.append(name)
        due = self.faulty_calls is None or len(self.ran) in self.faulty_calls
        if name in self.raises_under and due:
            raise RuntimeError(f"planted: raised under {name}")
        got = reference.run_reference(case, inputs, grads=grads, dtype=inputs.q.dtype)
        if name in self.wrong_under and due:
            got.out = got.out * 1.01
        return got


FAST = compat.InterpretOptions(interpreter="fast")


def _interpreters(kernel: InterpreterFake) -> list[str]:
    """The interpreters the kernel ran under, in order, a rerun on fresh inputs (harness.running.determinism)
    not counted again: what the interpreter policy chose."""
    return [name for name, _ in itertools.groupby(kernel.ran)]


def _policy_case(sampled: bool) -> Case:
    """A small case that the fast policy's declared share does (or does not) also run on the faithful interpreter."""
    from harness.running import runner

    return next(
        c
        for seed in range(200)
        if (int((c := small_case(seed=seed)).case_id, 16) % runner.FAITHFUL_ONE_IN == 0) is sampled
    )


def test_a_failure_on_the_fast_interpreter_alone_is_an_interpreter_divergence_never_a_kernel_failure():
    kernel = InterpreterFake("fast_only_bug", wrong_under=("fast",))
    result = run_case(_policy_case(False), [kernel], grads=False, interpret=FAST, policy="fast")
    (s,) = result.subjects
    # Each run once more on fresh inputs (harness.running.determinism: every fast run, and the confirmation),
    # the fast failure replayed on the faithful interpreter before it was reported, then once more on the
    # fast one: the same numbers, bit for bit, make it deterministic.
    assert kernel.ran == ["fast", "fast", "faithful", "faithful", "fast"]
    assert result.passed and result.divergences == [s]
    assert [(r.interpreter, r.passed) for r in s.shadow.replays] == [("fast", False)]
    assert (s.interpreter, s.passed, s.shadow.interpreter, s.shadow.passed) == ("faithful", True, "fast", False)
    (vs,) = [c for c in s.shadow.comparisons if c.quantity == "out[vs faithful]"]
    assert not vs.passed and vs.bound == next(c.bound for c in s.comparisons if c.quantity == "out")


@pytest.mark.parametrize(
    ("kernel", "flaky"),
    [
        # Raises under the fast interpreter every time: the kernel's failure, reproduced, never a divergence.
        pytest.param(InterpreterFake("raises_fast", raises_under=("fast",)), False, id="raises-every-fast-call"),
        # Raises on its first call alone: passes the faithful confirmation and the fast replay.
        pytest.param(InterpreterFake("raises_once", raises_under=("fast",), faulty_calls={1}), True, id="raises-once"),
        # Wrong numbers on its first call alone: a numeric failure that does not reproduce.
        pytest.param(InterpreterFake("wrong_once", wrong_under=("fast",), faulty_calls={1}), True, id="wrong-once"),
        # Wrong on its rerun alone (the second fast call): its result changed between calls on the same inputs,
        # whatever the faithful interpreter and the replay say (it was taken for an interpreter divergence).
        pytest.param(InterpreterFake("wrong_rerun", wrong_under=("fast",), faulty_calls={2}), True, id="wrong-rerun"),
    ],
)
def test_a_fast_failure_that_is_an_error_or_does_not_reproduce_is_the_kernels_failure(kernel, flaky):
    result = run_case(_policy_case(False), [kernel], grads=False, interpret=FAST, policy="fast")
    (s,) = result.subjects
    assert not result.passed and not result.divergences
    assert (s.interpreter, s.passed, s.flaky) == ("fast", False, flaky)
    assert [(r.interpreter, r.passed) for r in s.replays] == [("fast", flaky), ("faithful", True)]


def test_a_failure_on_both_interpreters_is_a_kernel_failure():
    kernel = InterpreterFake("bug", wrong_under=("fast", "faithful"))
    result = run_case(_policy_case(False), [kernel], grads=False, interpret=FAST, policy="fast")
    (s,) = result.subjects
    assert not result.passed and not result.divergences
    assert (s.interpreter, s.shadow.interpreter, s.shadow.passed) == ("faithful", "fast", False)


def test_a_pass_on_the_fast_interpreter_runs_nothing_else_unless_the_case_is_in_the_faithful_share():
    kernel = InterpreterFake("correct")
    (s,) = run_case(_policy_case(False), [kernel], grads=False, interpret=FAST, policy="fast").subjects
    assert _interpreters(kernel) == ["fast"] and (s.interpreter, s.shadow) == ("fast", None)
    kernel.ran.clear()
    (s,) = run_case(_policy_case(True), [kernel], grads=False, interpret=FAST, policy="fast").subjects
    assert _interpreters(kernel) == ["fast", "faithful"] and s.passed and s.shadow.passed and not s.divergence
    assert [c.max_abs for c in s.shadow.comparisons if c.quantity.endswith("[vs faithful]")] == [0.0]


@pytest.mark.parametrize(
    "policy, smoke, runs_on, ran",
    [
        ("fast", True, ("fast", "faithful"), ["faithful"]),  # smoke cases run on the faithful interpreter
        ("faithful", False, ("fast", "faithful"), ["faithful"]),
        ("both", False, ("fast", "faithful"), ["fast", "faithful"]),
        ("fast", False, ("faithful",), ["faithful"]),  # a kernel the HLO interpreter cannot run
        (None, False, ("fast", "faithful"), ["fast"]),  # no policy: the options' interpreter alone
    ],
)
def test_the_policy_picks_the_interpreters(policy, smoke, runs_on, ran):
    kernel = InterpreterFake("k", runs_on=runs_on)
    (s,) = run_case(_policy_case(False), [kernel], grads=False, interpret=FAST, policy=policy, smoke=smoke).subjects
    assert _interpreters(kernel) == ran and s.passed and s.interpreter == ran[-1]


def test_the_faithful_interpreters_checks_are_refused_on_the_fast_one():
    with pytest.raises(ValueError, match="need interpreter='faithful'"):
        compat.InterpretOptions(interpreter="fast", detect_races=True)


def test_a_rerun_that_returned_other_bits_makes_a_failure_flaky_whatever_its_replays() -> None:
    from harness.core import verdicts

    changed = [
        Comparison(
            quantity=verdicts.RERUN,
            max_abs=float("inf"),
            max_rel=float("inf"),
            oracle_abs=0.0,
            ratio=float("inf"),
            bound=0.0,
            passed=False,
        )
    ]
    assert verdicts.changed(changed) and verdicts.changed([{"quantity": "reproducible", "passed": False}])
    assert not verdicts.changed([{"quantity": "out", "passed": False}])
    assert verdicts.flaky(False, "fast", (), changed=True) and not verdicts.flaky(True, "fast", (), changed=True)
    assert "its result changed between calls on the same inputs" in verdicts.flaky_suffix(
        False, "fast", (), changed=True
    )
    from harness.running import determinism

    assert determinism.REPRODUCIBLE == verdicts.RERUN  # one name for the row, in the runner and the verdicts
