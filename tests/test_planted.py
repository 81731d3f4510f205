"""Detection power: every planted bug is caught under the ci profile, shrunk, and its file replays it.

Slow (minutes: each bug is a real search with the interpreted kernel); run with `-m slow`.
CPU seconds to detect each one are measured by `python -m tests.bench_planted`.
"""

from __future__ import annotations

import pytest

from harness import cli, compat, contract
from harness.failures import write_failure
from harness.search import search
from tests.planted import INTERPRET, PLANTED, spec


def _size(case):
    return (case.batch * case.q_heads * case.q_len * case.kv_len * case.head_dim, case.q_heads, case.batch)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PLANTED))
def test_planted_bug_is_caught_shrunk_and_replayed(tmp_path, capsys, name):
    kernel = contract.resolve(spec(name))
    oracles = [contract.resolve("torch_sdpa")]
    with compat.using_interpret_options(compat.InterpretOptions(**INTERPRET.get(name, {}))):
        outcome = search(kernel, oracles, profile="ci")
        path = outcome.shrunk and write_failure(tmp_path, outcome.shrunk, kernel=kernel, oracles=oracles, grads=True)
    assert outcome.shrunk is not None, f"{name} ({PLANTED[name]}) passed {len(outcome.results)} ci cases"
    first = next(r for r in outcome.results if not r.passed)
    assert _size(outcome.shrunk.case) <= _size(first.case)
    assert cli.main(["repro", str(path)]) == cli.EXIT_FAIL, capsys.readouterr().out
    # The upstream kernel on the same file passes: the failure is the planted line, not the case.
    assert cli.main(["repro", str(path), "--kernel", "pallas_flash"]) == cli.EXIT_OK, capsys.readouterr().out
