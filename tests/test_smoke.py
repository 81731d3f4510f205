"""Smoke cases: each declared mask component, tiling class and dtype early, smallest size first (harness.core.smoke)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import contract, coverage, features, pool, smoke
from harness.core.case import EXTREME_REGIMES, REGIMES, Case
from harness.running.search import search
from harness.running.signatures import smallest_with
from tests import _fakes

ROOT = Path(__file__).resolve().parents[1]
_real_cache_path = smoke.cache_path  # before tests/conftest.py turns the cache off for each test


def _drawn(impl) -> set[str]:
    return {f"{a.name}.{p.name}" for a in coverage.apis_of(impl) for p in a.params if p.is_drawn}


def test_the_flash_smoke_set_covers_every_mask_tiling_dtype_and_drawn_api_parameter_in_five_small_cases():
    flash = contract.registry()["pallas_flash"]
    # 4 for the features; 1 for sm_scale and save_residuals together; then one per extreme regime, then
    # the cotangent of rows that see no key (none here: no smoke case has a row that sees no key).
    found = smoke.smoke_cases(flash)
    cases, regimes = found[:5], found[5 : 5 + len(EXTREME_REGIMES)]
    assert [c.regime for c in regimes] == list(EXTREME_REGIMES)
    # Each regime meets a mask (causal first): a finite mask value shows only where a mask hides a key.
    assert regimes[0].mask.causal == "top_left" and all(c.mask_label != "none" for c in regimes)
    assert set().union(*(coverage.exercised(flash, c) for c in cases)) == _drawn(flash)
    assert set().union(*(coverage.exercised(flash, c) for c in cases[:4])) < _drawn(flash)
    seen = set().union(*(features.of(c, flash) for c in cases))
    for group in smoke.GROUPS:
        assert {f"{group}:{v}" for v in features.declared(flash)[group]} <= seen, group
    for case in cases:
        assert not flash.violations(case)
        assert case.batch == 1 and case.q_heads == 1 and max(case.q_len, case.kv_len) <= 256
    assert "mask:causal_top_left" in features.of(cases[0], flash)  # the commonest bugs first
    assert smoke.smoke_cases(flash) == found  # the same every run
    assert found[5 + len(EXTREME_REGIMES) :] == smoke.cotangent_cases(flash, cases + regimes)


def test_a_search_starts_with_the_smoke_cases_and_counts_them_in_its_examples():
    kernel = _fakes.FakeKernel("tests._fakes:smoked")
    cases = smoke.smoke_cases(kernel)
    outcome = search(kernel, [], examples=len(cases) + 2, profile="ci", grads=False, smoke=True)
    assert [r.case for r in outcome.results[: len(cases)]] == cases
    assert len(outcome.results) <= len(cases) + 2 and outcome.passed
    only = search(kernel, [], examples=1, profile="ci", grads=False, smoke=True)
    assert [r.case for r in only.results] == cases[:1]


def test_a_failing_smoke_case_is_the_reported_failure():
    kernel = _fakes.FakeKernel("tests._fakes:causal_broken", broken=lambda c: c.mask.causal is not None)
    outcome = search(kernel, [], examples=10, profile="ci", grads=False, smoke=True)
    assert outcome.shrunk is not None and outcome.shrunk.case == smoke.smoke_cases(kernel)[0]
    # Its one feature beyond the plainest case left out: the plainest case, which passes.
    assert outcome.shrunk.case.mask.causal == "top_left" and outcome.shrink_runs == 1
    without = search(kernel, [], examples=1, profile="ci", grads=False, reuse=False)
    assert without.results[0].case.mask.causal is None  # Hypothesis alone starts from no mask


def test_a_failing_smoke_case_is_shrunk_over_its_features():
    # A causal bug met first in a causal case with unequal lengths: each feature left out in turn, the same
    # case with its queries grown to the keys' length fails the same way; leaving causal out passes. Last, the
    # smallest case with exactly the trigger, smaller than the grown one, fails alike and is reported.
    kernel = _fakes.FakeKernel("tests._fakes:causal_broken", broken=lambda c: c.mask.causal is not None)
    rich = smoke.smallest(kernel, frozenset({"mask:causal_top_left", "lengths:unequal"}))
    assert rich is not None and rich.kv_len > rich.q_len
    outcome = search(kernel, [], examples=2, profile="ci", grads=False, smoke=[rich])
    (failure,) = outcome.failures
    smallest = smallest_with(("mask:causal_top_left",), kernel)
    assert failure.case == smallest and pool.size(smallest) < pool.size(rich.replace(q_len=rich.kv_len))
    assert smallest.q_len == smallest.kv_len and smallest.mask.causal == "top_left"
    assert outcome.shrinks[0].shrunk and outcome.shrinks[0].trigger == ("mask:causal_top_left",)
    assert [r.case for r in outcome.results][:1] == [rich]  # the smoke case is the run's, its shrink apart
    # The budget bounds it: with no shrink runs the smoke case is reported as found.
    kept = search(kernel, [], examples=2, profile="ci", grads=False, smoke=[rich], shrink_runs=0)
    assert kept.failures[0].case == rich and kept.shrinks[0].exhausted


def _scale(case: Case) -> bool:
    return case.scale is not None


def _never(case: Case) -> bool:
    return False


class _WithApi(_fakes.FakeKernel):
    # A drawn parameter only some draws exercise (an explicit scale), one always exercised, and one no
    # case can exercise (a declaration the strategies do not honour). Every value regime, the extreme ones too.
    capabilities = dataclasses.replace(_fakes.FakeKernel.capabilities, regimes=REGIMES)
    api = (
        coverage.Api(
            name="fake.attention",
            params=(
                coverage.Param(name="q", drawn="q", exercised=coverage.always),
                coverage.Param(name="scale", drawn="a scale", exercised=_scale),
                coverage.Param(name="ghost", drawn="never", exercised=_never),
            ),
            locate=lambda: None,
        ),
    )


def test_api_cases_follow_the_feature_cases_and_exercise_what_they_left_unexercised():
    kernel = _WithApi("tests.test_smoke:api")
    cases, regimes = smoke.smoke_cases(kernel), smoke.regime_cases(kernel)
    assert regimes and cases[len(cases) - len(regimes) :] == regimes  # the extreme regimes last
    cases = cases[: len(cases) - len(regimes)]
    feature_cases = [c for c in cases if c.scale is None]
    assert cases[: len(feature_cases)] == feature_cases  # features first, the API case last
    assert [c.scale is not None for c in cases] == [False] * len(feature_cases) + [True]
    # The smallest such case: Hypothesis's shrink, not whatever draw the pool had.
    assert cases[-1].q_len == cases[-1].kv_len == 16 and cases[-1].head_dim == 32
    assert smoke.smoke_cases(kernel)[: len(cases)] == cases  # the same every run


def test_a_search_that_stops_at_a_feature_case_never_looks_for_the_api_cases(monkeypatch):
    # Looking for them costs a few CPU seconds (the greedy cover's draws and finds): a planted bug
    # that a feature case catches is caught without paying for them, by a search that stops at its
    # first failure (one that goes on looks for every distinct failure, so for them too).
    kernel = _WithApi("tests.test_smoke:api_causal_broken", broken=lambda c: c.mask.causal is not None)
    looked: list[str] = []
    monkeypatch.setattr(smoke, "_api_cases", lambda impl: looked.append(impl.name) or ())
    outcome = search(kernel, [], examples=10, profile="ci", grads=False, smoke=True, first_failure=True)
    assert outcome.shrunk is not None and outcome.shrunk.case == smoke.feature_cases(kernel)[0]
    assert looked == []
    passing = _WithApi("tests.test_smoke:api_passing")
    search(passing, [], examples=len(smoke.feature_cases(passing)) + 1, profile="ci", grads=False, smoke=True)
    assert looked == ["tests.test_smoke:api_passing"]


def test_a_found_smoke_set_is_read_back_from_disk_and_found_anew_when_unreadable(monkeypatch, tmp_path):
    kernel = _WithApi("tests.test_smoke:cached")
    monkeypatch.setattr(smoke.compat, "compilation_cache_dir", lambda: str(tmp_path / "jax"))
    path = _real_cache_path(kernel)
    assert path is not None and path.parent == tmp_path / "jax-smoke"
    monkeypatch.setattr(smoke, "cache_path", _real_cache_path)
    found = list(smoke.iter_smoke_cases(kernel))
    assert found == smoke.smoke_cases(kernel) and path.exists()
    # Read back: nothing is looked for.
    monkeypatch.setattr(smoke, "_found", lambda impl: pytest.fail("found again despite the cache"))
    assert list(smoke.iter_smoke_cases(kernel)) == found
    # Unreadable (truncated by a crash, edited by hand): found anew, and written whole again.
    path.write_text('{"cases": [{"batch": 1}')
    monkeypatch.setattr(smoke, "_found", lambda impl: iter(found[:1]))
    assert list(smoke.iter_smoke_cases(kernel)) == found[:1]
    assert list(smoke.iter_smoke_cases(kernel)) == found[:1]  # what was written last


def test_the_smoke_cache_key_follows_the_contract_and_is_off_with_the_compilation_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(smoke.compat, "compilation_cache_dir", lambda: str(tmp_path / "jax"))
    a, b = _WithApi("tests.test_smoke:a"), _WithApi("tests.test_smoke:a")
    assert _real_cache_path(a) == _real_cache_path(b)
    b.capabilities = dataclasses.replace(b.capabilities, head_dims=(32,))
    assert _real_cache_path(a) != _real_cache_path(b)
    # MODULE:ATTR implementations of one class and contract draw the same: their name changes nothing drawn.
    assert _real_cache_path(a) == _real_cache_path(_WithApi("tests.test_smoke:other"))
    assert _real_cache_path(a) != _real_cache_path(_fakes.FakeKernel("tests.test_smoke:a"))  # another class
    # A drop-in of a built-in draws what the built-in draws: it shares the built-in's set.
    flash = contract.resolve("pallas_flash")
    dropin = contract.resolve("tests.planted.fwd_causal_off_by_one:flash_attention")
    assert _real_cache_path(dropin) == _real_cache_path(flash) != _real_cache_path(contract.resolve("pallas_splash"))
    monkeypatch.setattr(smoke.compat, "compilation_cache_dir", lambda: None)
    assert _real_cache_path(a) is None


def test_the_smoke_cache_key_is_the_same_in_every_process():
    # A frozenset's repr follows string hashes, randomized per process: the key once differed in most
    # processes, so the set was found anew (3 to 8 CPU s) by nearly every run and worker.
    code = "import harness; from harness.core import contract, smoke; "
    code += "print(smoke.cache_path(contract.resolve('pallas_flash')))"
    keys = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        keys.add(done.stdout.strip())
    assert len(keys) == 1, keys
    assert smoke.stable_repr(frozenset({"b", "a"})) == "{'a', 'b'}"


WITH_OPTIONS = sorted(
    n
    for n, k in contract.registry().items()
    if k.role == "kernel" and any(getattr(k.capabilities, o) for o in features.OPTIONS)
)


@pytest.mark.parametrize("name", WITH_OPTIONS)
def test_each_option_meets_every_dtype_in_the_feature_cases(name):
    # The options advance once per round of the dtypes: splash's sinks met float32 alone before, and a
    # bug of sinks in 16 bits (SPL-5: dsinks summed in bfloat16) needs the pair.
    impl = contract.registry()[name]
    met = {
        (o, c.dtype) for c in smoke.feature_cases(impl) for o in features.OPTIONS if getattr(c, o) not in (None, False)
    }
    declared = [o for o in features.OPTIONS if getattr(impl.capabilities, o)]
    assert met == {(o, d) for o in declared for d in impl.capabilities.dtypes}, met


def test_a_run_that_asks_for_few_smoke_cases_keeps_them_and_the_next_reads_them(monkeypatch, tmp_path):
    kernel = _WithApi("tests.test_smoke:partial")
    monkeypatch.setattr(smoke.compat, "compilation_cache_dir", lambda: str(tmp_path / "jax"))
    monkeypatch.setattr(smoke, "cache_path", _real_cache_path)
    whole = smoke.smoke_cases(kernel)
    assert len(whole) > 2
    first = smoke.iter_smoke_cases(kernel)
    assert [next(first), next(first)] == whole[:2]
    first.close()  # a run that stopped asking: the two it found are kept, marked partial
    found: list[int] = []
    real_found = smoke._found

    def counting(impl):
        for case in real_found(impl):
            found.append(1)
            yield case

    monkeypatch.setattr(smoke, "_found", counting)
    again = smoke.iter_smoke_cases(kernel)
    assert [next(again), next(again)] == whole[:2] and found == []  # read back, nothing looked for
    assert list(again) == whole[2:]  # asked for more: found, the ones read back not yielded twice
    monkeypatch.setattr(smoke, "_found", lambda impl: pytest.fail("found again despite the whole set cached"))
    assert list(smoke.iter_smoke_cases(kernel)) == whole


def test_a_partial_set_never_replaces_a_whole_one_another_process_wrote(monkeypatch, tmp_path):
    kernel = _WithApi("tests.test_smoke:race")
    monkeypatch.setattr(smoke.compat, "compilation_cache_dir", lambda: str(tmp_path / "jax"))
    monkeypatch.setattr(smoke, "cache_path", _real_cache_path)
    whole = smoke.smoke_cases(kernel)
    partial = smoke.iter_smoke_cases(kernel)
    next(partial)
    assert list(smoke.iter_smoke_cases(kernel)) == whole  # another run finds and writes the whole set
    partial.close()  # the first run stops after one case: it must not overwrite the whole set
    monkeypatch.setattr(smoke, "_found", lambda impl: pytest.fail("the whole set was lost"))
    assert list(smoke.iter_smoke_cases(kernel)) == whole
