"""harness.api, the library a kernel team's own tests use: its names, its strategy, `check` and its failure."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings

from harness import api
from harness.cli import main
from harness.core.contract import ContractError
from harness.core.errors import InputError
from tests._fakes import small_case

BROKEN = "tests._fakes:BROKEN"  # wrong on head_dim 64 with at least 32 keys
CORRECT = "tests._fakes:CORRECT"


def test_every_name_in_all_is_there_and_says_what_it_is():
    assert len(set(api.__all__)) == len(api.__all__)
    for name in api.__all__:
        value = getattr(api, name)
        assert not callable(value) or value.__doc__, name


@pytest.mark.parametrize(
    ("spec", "like", "message"),
    [
        pytest.param("nonesuch", None, "unknown implementation 'nonesuch'", id="unknown"),
        pytest.param("pallas_flash", "jax_xla", "like='jax_xla' takes a MODULE:ATTR drop-in function", id="like-name"),
        pytest.param("jax_xla=a.b:c", "jax_xla", "already names the built-in kernel it is like", id="like-twice"),
        pytest.param("tests.no_such_module:f", "jax_xla", "cannot import module 'tests.no_such_module'", id="import"),
    ],
)
def test_a_bad_kernel_spec_is_one_input_error_naming_the_fix(spec, like, message):
    with pytest.raises(InputError, match=message):
        api.kernel(spec, like=like)


def test_an_implementation_is_its_own_kernel_and_takes_no_like():
    impl = api.kernel(CORRECT)
    assert api.kernel(impl) is impl
    with pytest.raises(InputError, match="applies to a MODULE:ATTR drop-in"):
        api.kernel(impl, like="pallas_flash")


@settings(max_examples=15, deadline=None, database=None)
@given(case=api.cases("pallas_flash", dtypes=["bfloat16"]))
def test_drawn_cases_are_inside_the_kernels_contract(case):
    assert case.dtype == "bfloat16"
    api.kernel("pallas_flash").check(case)  # raises ContractError outside it


def test_a_strategy_outside_the_declared_dtypes_is_refused_when_built():
    with pytest.raises(ValueError, match=r"dtypes \['float64'\] are not supported by tests._fakes:CORRECT"):
        api.cases(CORRECT, dtypes=["float64"])


@pytest.mark.parametrize(
    ("kw", "error", "message"),
    [
        pytest.param({"interpreter": "hlo"}, InputError, "interpreter='hlo' must be one of", id="interpreter"),
        pytest.param({"time_limit": 0}, InputError, "time_limit=0 must be a positive number", id="time-limit"),
        pytest.param({"case": small_case(head_dim=128)}, ContractError, "head_dim", id="outside-contract"),
    ],
)
def test_check_refuses_bad_arguments_before_running(kw, error, message):
    kw = {"case": small_case(), **kw}
    with pytest.raises(error, match=message):
        api.check(CORRECT, **kw)


def test_a_passing_case_returns_its_result():
    result = api.check(CORRECT, small_case())
    assert isinstance(result, api.CaseResult) and result.passed


def test_a_failure_is_an_assertion_error_with_the_table_and_the_replay_command(tmp_path, capsys):
    with pytest.raises(AssertionError) as raised:
        api.check(BROKEN, small_case(), out=tmp_path)
    failure = raised.value
    assert isinstance(failure, api.CaseFailure) and not failure.result.passed
    message = str(failure)
    assert message.startswith(f"FAILURE {BROKEN} on B=1 H=1 Lq=16/Lk=32 D=64 float32")
    assert "quantity      max_abs" in message and "where the error sits" in message
    (path,) = (tmp_path / "failures").glob("*.json")
    assert failure.path == path and failure.replay == f"python -m harness repro {path}"
    assert message.endswith(f"replay: {failure.replay}")
    assert json.loads(path.read_text())["search"] == {"found_by": "harness.api.check"}
    assert main(["repro", str(path)]) == 1  # it still fails
    capsys.readouterr()


def test_without_out_the_message_says_how_to_get_a_failure_file():
    with pytest.raises(api.CaseFailure) as raised:
        api.check(BROKEN, small_case(), grads=False)
    assert raised.value.path is None and raised.value.replay is None
    assert "check(..., out=DIR) writes one" in str(raised.value)


def test_inside_hypothesis_only_the_shrunk_failure_writes_a_file(tmp_path):
    @settings(max_examples=30, deadline=None, database=None, derandomize=True)
    @given(case=api.cases(BROKEN))
    def team_test(case):
        api.check(BROKEN, case, out=tmp_path, grads=False)

    with pytest.raises(api.CaseFailure) as raised:
        team_test()
    (path,) = (tmp_path / "failures").glob("*.json")
    case = raised.value.result.case
    assert raised.value.path == path
    # The smallest failing case: BROKEN's bug needs head_dim 64 and 32 keys, and nothing else.
    assert (case.head_dim, case.kv_len, case.q_len, case.mask_label) == (64, 32, 16, "none")
