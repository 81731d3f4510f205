"""harness.running.known: a failure is named as a finding only where the finding's unfixed kernel fails the
case the same way and its proven fix passes it; --known makes it expected, strictly."""

from __future__ import annotations

import dataclasses

import pytest

from harness import findings
from harness.core.errors import InputError
from harness.running import known
from harness.running.runner import Check, run_case
from harness.runtime.compat import DEFAULT_INTERPRET
from tests import _fakes

# A fork with a bug of its own where upstream (BROKEN: head_dim 64 and kv_len >= 32) is right.
FORK = _fakes.FakeKernel("tests._fakes:FORK", broken=lambda c: c.head_dim == 32)


def _finding() -> findings.Finding:
    some = findings.catalogue()[0]
    fix = findings.Fix(fixed="tests._fakes:CORRECT", unfixed="tests._fakes:BROKEN")
    return dataclasses.replace(some, name="fake_bug", kind="bug", title="the fake bug", fix=fix)


@pytest.mark.parametrize(
    ("kernel", "case", "named"),
    [
        pytest.param(_fakes.BROKEN, _fakes.small_case(head_dim=64, kv_len=32), True, id="upstream-itself"),
        # The fork fails where upstream does too, the same way: the known bug, inherited.
        pytest.param(
            _fakes.FakeKernel("tests._fakes:BROKEN", broken=_fakes.BROKEN.broken),
            _fakes.small_case(head_dim=64, kv_len=32),
            True,
            id="inherited",
        ),
        # The fork's own bug, on a case upstream gets right: never named as upstream's finding.
        pytest.param(FORK, _fakes.small_case(head_dim=32, kv_len=32), False, id="new-bug"),
    ],
)
def test_a_failure_is_named_only_where_upstream_fails_it_and_the_fix_passes_it(kernel, case, named):
    result = run_case(case, [kernel], grads=False)
    assert not result.passed
    got = known.match(result, Check(kernel=kernel, grads=False), [_finding()])
    assert (got is not None) == named
    if named:
        assert got.name == "fake_bug" and not got.expected and got.fixed == "tests._fakes:CORRECT"


def test_a_known_finding_is_expected_by_name_and_a_wrong_name_is_bad_input():
    result = run_case(_fakes.small_case(head_dim=64, kv_len=32), [_fakes.BROKEN], grads=False)
    got = known.match(result, Check(kernel=_fakes.BROKEN, grads=False), [_finding()], expected=("fake_bug",))
    assert got is not None and got.expected and "expected" in got.line()
    with pytest.raises(InputError, match="--known 'no_such_finding' is no finding; findings: "):
        known.check_names(("no_such_finding",))


def test_the_findings_with_a_proven_fix_are_the_candidates_of_their_kernel():
    from harness.core import contract

    names = {f.name for f in known.candidates(contract.resolve("pallas_splash"))}
    assert "pallas_splash_backward_nan_larger_dkv_tile" in names
    assert not any(n.startswith("jax_xla") for n in names)


def test_an_expected_finding_whose_own_case_passes_now_is_reported(monkeypatch, tmp_path):
    from harness.running.failures import write_failure

    case = _fakes.small_case(head_dim=64, kv_len=32)
    result = run_case(case, [_fakes.BROKEN], grads=False)
    path = write_failure(tmp_path, result, Check(kernel=_fakes.BROKEN, grads=False))
    finding = dataclasses.replace(_finding(), fix=dataclasses.replace(_finding().fix, case=path))
    monkeypatch.setattr(findings, "catalogue", lambda: [finding])
    assert known.still_fails("fake_bug", Check(kernel=_fakes.BROKEN)) is None  # still fails: nothing to say
    line = known.still_fails("fake_bug", Check(kernel=_fakes.CORRECT))
    assert line is not None and "expected to fail, but tests._fakes:CORRECT passes its case" in line


def _drop_in(name: str, broken, effect: str = "scale") -> _fakes.FakeKernel:
    """A fork of BROKEN, as `--kernel BROKEN=MODULE:ATTR` would load one (Implementation.drops_into)."""
    fork = _fakes.FakeKernel(name, broken=broken, effect=effect)
    fork.drops_into = "tests._fakes:BROKEN"
    return fork


class _DvFork(_fakes.FakeKernel):
    """A fork of BROKEN whose edit gives wrong dv, where BROKEN gives wrong out, on the same cases."""

    def run(self, case, inputs, *, grads):
        got = super().run(case, inputs, grads=grads)
        if self.broken(case):
            got.out, got.dv = got.out / 1.01, got.dv * 1.01
        return got


def _dv_fork() -> _DvFork:
    fork = _DvFork("tests._fakes:DV_FORK", broken=_fakes.BROKEN.broken)
    fork.drops_into = "tests._fakes:BROKEN"
    return fork


@pytest.mark.parametrize(
    ("kernel", "case", "inherited"),
    [
        # Upstream fails this case the same way: the fork inherited the bug.
        pytest.param(_drop_in("tests._fakes:FORK", _fakes.BROKEN.broken), dict(head_dim=64, kv_len=32), True),
        # The fork's own edit: upstream gets the case right.
        pytest.param(_drop_in("tests._fakes:FORK", FORK.broken), dict(head_dim=32, kv_len=32), False),
        # Upstream fails the case, but another way (it raises where the fork's values are wrong): not the same bug.
        pytest.param(
            _drop_in("tests._fakes:RAISING_FORK", _fakes.BROKEN.broken, effect="raise"),
            dict(head_dim=64, kv_len=32),
            False,
            id="another-way",
        ),
        # Wrong values in other quantities (the fork's dv, upstream's out): two bugs, not one inherited.
        pytest.param(_dv_fork(), dict(head_dim=64, kv_len=32), False, id="other-quantities"),
        # A built-in derives from nothing.
        pytest.param(_fakes.BROKEN, dict(head_dim=64, kv_len=32), False, id="built-in"),
    ],
)
def test_a_drop_ins_failure_is_inherited_where_its_upstream_fails_the_case_alike(kernel, case, inherited):
    result = run_case(_fakes.small_case(**case), [kernel], grads=True, time_limit=None, interpret=DEFAULT_INTERPRET)
    assert not result.passed
    got = known.inherited(result, Check(kernel=kernel, grads=True))
    assert got == ("tests._fakes:BROKEN" if inherited else None)
