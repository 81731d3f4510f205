"""Detection power: every planted bug is caught under the ci profile, shrunk, and its file replays it.

The search over every planted bug is slow (minutes: each is a real search with the interpreted
kernel); run it with `-m slow` (`nox -s planted`, scheduled in CI by .github/workflows/planted.yml).
CPU seconds to detect each one are measured by `python -m tests.bench_planted`. The subtle bugs
(tests.planted.SUBTLE) run in the default suite on one fixed case each.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from harness import cli
from harness.core import contract, pool
from harness.core.case import Case
from harness.running.failures import load_failure, write_divergence, write_failure
from harness.running.runner import Check, run_case
from harness.running.search import search
from harness.runtime import compat
from kernels.pallas_flash import uniform_blocks
from tests import planted
from tests.planted import ELSEWHERE, INTERPRET, PLANTED, SUBTLE, TRIGGERS, spec

# One forward case (a few CPU seconds under the interpreter). Its bound is float32's floor
# times the output's term magnitude; fwd_p_bfloat16's error here is ~43x that bound (measured),
# so a floor 100x looser, or a rule that loses the floor's precision class, lets it pass.
SUBTLE_CASE = Case(batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=256, head_dim=64, seed=0)
# The bug must be a near miss: past the bound, yet within a modest factor of it.
NEAR_MISS = (1.0, 100.0)
# Every module under tests/planted/: the planted bugs, the fixtures, the controls and the outline forks.
MODULES = sorted(p.stem for p in Path(planted.__file__).parent.glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("name", MODULES)
def test_every_planted_edit_applies_to_the_installed_upstream_source(name):
    # Each edit matches upstream as often as it declares (tests/planted/_patch.py) or the module fails to build:
    # a jax release that moves an edited line fails here in seconds, not minutes into the slow search.
    importlib.import_module(f"tests.planted.{name}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PLANTED))
def test_planted_bug_is_caught_shrunk_and_replayed(tmp_path, capsys, name):
    kernel = contract.resolve(spec(name))
    oracles = [contract.resolve("torch_sdpa")]
    options = compat.InterpretOptions(**INTERPRET.get(name, {}))
    outcome = search(kernel, oracles, profile="ci", interpret=options)
    path = outcome.shrunk and write_failure(
        tmp_path, outcome.shrunk, Check(kernel=kernel, oracles=oracles, grads=True, interpret=options)
    )
    assert outcome.shrunk is not None, f"{name} ({PLANTED[name]}) passed {len(outcome.results)} ci cases"
    first = next(r for r in outcome.results if not r.passed)
    assert pool.size(outcome.shrunk.case) <= pool.size(first.case)
    assert cli.main(["repro", str(path)]) == cli.EXIT_FAIL, capsys.readouterr().out
    # The upstream kernel on the same file passes: the failure is the planted line, not the case.
    assert cli.main(["repro", str(path), "--kernel", "pallas_flash"]) == cli.EXIT_OK, capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", [*PLANTED, *ELSEWHERE])
def test_a_run_keeps_one_file_per_planted_bug_and_its_trigger_names_what_the_edit_needs(tmp_path, name):
    # As a user runs it: the CLI, default options (--jobs included) under the ci profile.
    assert set(TRIGGERS) == {*PLANTED, *ELSEWHERE}, "every planted bug says what its edit needs"
    code = cli.main(["run", "--kernel", ELSEWHERE.get(name) or spec(name), "--profile", "ci", "--out", str(tmp_path)])
    assert code == cli.EXIT_FAIL, f"{name}: exit {code}"
    # A finding of the upstream kernel (jax_xla's float64 softmax on this jax) is named, apart from the new bug; so
    # is a failure upstream, as installed, fails alike (inherited: splash's lse limitation beside a splash fork's).
    files = sorted((tmp_path / "failures").glob("*.json"))
    apart = ("finding", "inherited_from")
    files = [f for f in files if not set(apart) & set(load_failure(f).record.search or {})]
    assert len(files) == 1, f"{name}: {len(files)} failure files for one bug: {[f.name for f in files]}"
    search_info = load_failure(files[0]).record.search or {}
    trigger = tuple(search_info.get("trigger") or ())
    needed, holds = TRIGGERS[name]
    assert holds(trigger), f"{name} needs {needed}; its trigger: {search_info.get('trigger_words')} {trigger}"
    # Each shown needed: the same case (shapes, data) without it, by an edit of the case or its tiles, passed.
    assert set(search_info.get("needs", ())) == set(trigger), search_info.get("trigger_words")


@pytest.mark.parametrize("name", list(SUBTLE))
def test_subtle_bug_fails_by_a_modest_factor_and_the_upstream_kernel_passes(name):
    planted, upstream = contract.resolve(spec(name)), contract.resolve("pallas_flash")
    result = run_case(SUBTLE_CASE, [planted, upstream], grads=False)
    bad, good = result.subjects
    (out,) = [c for c in bad.comparisons if c.quantity == "out"]
    lo, hi = NEAR_MISS
    assert not out.passed and lo < out.max_abs / out.bound < hi, (
        f"{name}: err {out.max_abs:.3g}, bound {out.bound:.3g}, ratio {out.max_abs / out.bound:.3g} not in {NEAR_MISS}"
    )
    assert good.passed, good.failure


# Two key tiles: the multi-step forward kernel, the one with a scratch accumulator (one key tile
# runs the single-step kernel, which has none).
UNINITIALIZED_CASE = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=256, head_dim=128, blocks=uniform_blocks())


@pytest.mark.parametrize("fill", ["nan", "zero"])
def test_a_read_of_scratch_never_written_is_never_a_pass_and_says_which_interpreter_saw_it(tmp_path, fill):
    kernel = contract.resolve(spec("fwd_acc_uninitialized"))
    options = compat.InterpretOptions(interpreter="fast", uninitialized_memory=fill)
    result = run_case(UNINITIALIZED_CASE, [kernel], grads=False, interpret=options, policy="fast")
    (s,) = result.subjects
    # Failed on the fast interpreter (its scratch starts as NaN whatever the fill), so replayed on the faithful one.
    assert (s.interpreter, s.shadow.interpreter, s.shadow.passed) == ("faithful", "fast", False)
    if fill == "nan":  # the faithful interpreter's poison shows the read too: a kernel failure
        assert not result.passed and not result.divergences
        path = write_failure(tmp_path, result, Check(kernel=kernel, grads=False, interpret=options))
    else:  # a zero fill hides it from the faithful interpreter: an interpreter divergence, reported apart
        assert result.passed and result.divergences == [s]
        path = write_divergence(tmp_path, result, s, kernel=kernel, oracles=[], grads=False, interpret=options)
        assert path.parent.name == "divergences"
        assert "on faithful passed; on fast failed: out:" in load_failure(path).record.failure
    table = load_failure(path).record.results
    assert {name: entry["interpreter"] for name, entry in table.items()} == {
        kernel.name: "faithful",
        f"{kernel.name}@fast": "fast",
    }
