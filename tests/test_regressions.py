"""The regression corpus: every case pinned with `python -m harness pin` must still pass.

A pinned case replays against the kernel its file names (the one it was found with, or the
one given to `pin --kernel`), with its recorded interpreter options and oracles.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.running.failures import iter_failure_files, load_failure, replay
from harness.store import bug_views

CORPUS = Path(__file__).parent / "regressions"


@pytest.mark.parametrize("path", list(iter_failure_files(CORPUS)), ids=lambda p: p.stem)
def test_pinned_case_stays_fixed(path):
    ff = load_failure(path)
    result = replay(ff)
    assert result.passed, "\n".join(bug_views.error_table(s, ff.case.dtype) for s in result.subjects if not s.passed)
