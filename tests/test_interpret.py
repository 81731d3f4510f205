"""interpret: the interpreter each Pallas TPU kernel call runs under, chosen by InterpretOptions."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from harness.runtime import interpret


def _add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def _interpret_param(options: interpret.InterpretOptions):
    """The `interpret` parameter of a pallas_call traced inside tpu_kernel_context under `options`."""
    x = jnp.zeros((8, 128), jnp.float32)
    f = lambda x: pl.pallas_call(_add_one, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)  # noqa: E731
    with interpret.using_interpret_options(options), interpret.tpu_kernel_context():
        jaxpr = jax.make_jaxpr(f)(x)
        assert (f(x) == 1.0).all()
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "pallas_call"]
    return eqn.params["interpret"]


def test_fast_runs_the_hlo_interpreter_and_faithful_the_tpu_interpret_mode():
    assert interpret.hlo_interpreter() is None  # this jax has a way to force it (probed)
    assert _interpret_param(interpret.InterpretOptions(interpreter="fast")) is True
    faithful = _interpret_param(interpret.InterpretOptions(interpreter="faithful"))
    assert faithful is not True and type(faithful).__name__.endswith("InterpretParams")


def test_the_fast_mode_ends_with_its_block():
    with (
        interpret.using_interpret_options(interpret.InterpretOptions(interpreter="fast")),
        interpret.tpu_kernel_context(),
    ):
        pass
    assert _interpret_param(interpret.DEFAULT_INTERPRET) is not True


def test_options_saved_before_the_interpreter_field_read_as_faithful():
    old = {"detect_races": False, "uninitialized_memory": "nan", "random_seed": None, "check_grid_order": False}
    assert interpret.InterpretOptions.from_json(old).interpreter == "faithful"
    fast = interpret.InterpretOptions(interpreter="fast")
    assert interpret.InterpretOptions.from_json(fast.to_json()) == fast


def test_an_unknown_interpreter_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"interpreter='hlo' is not one of \('fast', 'faithful'\)"):
        interpret.InterpretOptions(interpreter="hlo")


@pytest.mark.parametrize("mode", interpret._HLO_MODES, ids=lambda m: m.__name__)
def test_every_way_of_forcing_the_hlo_interpreter_works_on_this_release(mode):
    # Older releases get the first way that passes the probe; each is checked here where it can be.
    assert interpret._traced_interpret(mode) is True


def _without_the_tpu_interpret_mode(monkeypatch):
    """This jax as jax 0.6 is: no force_tpu_interpret_mode, no InterpretParams (nor its older name)."""
    from jax.experimental.pallas import tpu as pltpu

    for name in ("force_tpu_interpret_mode", "InterpretParams", "TPUInterpretParams"):
        monkeypatch.delattr(pltpu, name, raising=False)
    from kernels import _pallas

    # Probed anew (the way to force the HLO interpreter too), the real probes kept for later tests.
    monkeypatch.setattr(_pallas, "_FAST_PROBES", {})
    monkeypatch.setattr(interpret, "_hlo_mode", functools.cache(interpret._hlo_mode.__wrapped__))


def test_a_missing_tpu_interpret_mode_is_said_and_the_kernel_runs_on_the_hlo_interpreter(monkeypatch):
    from harness.core import contract

    _without_the_tpu_interpret_mode(monkeypatch)
    reason = interpret.faithful_interpreter()
    assert "force_tpu_interpret_mode and InterpretParams, which this jax lacks" in reason
    flash = contract.resolve("pallas_flash")
    assert flash.interpreters() == ("fast",) and flash.cannot_run() is None
    assert interpret._hlo_mode() is interpret._config_true  # the way forced where the function is missing
    with pytest.raises(interpret.InterpreterUnavailable, match="lacks"):
        with interpret.using_interpret_options(interpret.DEFAULT_INTERPRET), interpret.tpu_kernel_context():
            pass


def test_no_interpreter_for_a_kernel_is_cannot_run_here_never_a_failure(monkeypatch, tmp_path, capsys):
    # As on a release with neither interpreter: the harness's gap, so exit 4 with the reason and no failure file.
    from harness import cli

    _without_the_tpu_interpret_mode(monkeypatch)
    monkeypatch.setattr(interpret, "_HLO_MODES", (interpret._force_mode_true,))  # needs the missing function
    code = cli.main(["run", "--kernel", "pallas_flash", "--examples", "1", "--jobs", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == cli.EXIT_CANNOT_RUN, out
    assert "cannot run here: the TPU interpret mode (interpreter='faithful') needs" in out
    assert "under the HLO interpreter: no way to run Pallas TPU kernels under the HLO interpreter" in out
    assert not list(tmp_path.rglob("failures/*")) and "FAIL" not in out


def test_the_simulated_cores_go_in_under_the_field_name_this_release_has():
    # jax 0.7.0's InterpretParams names it num_cores_per_device, 0.8.3's num_cores_or_threads_per_device: a
    # paged megacore case FAILed in both cells with "unexpected keyword argument 'num_cores_or_threads'", a
    # harness gap reported as a kernel failure.
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Old:
        detect_races: bool = False
        num_cores_per_device: int = 1

    @dataclasses.dataclass(frozen=True)
    class Single:
        detect_races: bool = False

    @dataclasses.dataclass(frozen=True)
    class Between:  # jax 0.8.3
        num_cores_or_threads_per_device: int = 1

    assert interpret.cores_field(Old) == "num_cores_per_device"
    assert interpret.cores_field(Between) == "num_cores_or_threads_per_device"
    with pytest.raises(interpret.InterpreterUnavailable, match="simulates one core only"):
        interpret.cores_field(Single)
    _, installed = interpret._faithful_api()
    assert interpret.cores_field(installed) in interpret.CORES_FIELDS
    params = _interpret_param(interpret.InterpretOptions(cores=2))  # the TPU interpret mode's parameters
    assert getattr(params, interpret.cores_field(type(params))) == 2
