"""`pytest -p tests._repeat --repeat N`: every selected test runs N times (N ids: [r0] .. [rN-1]).

For `nox -s flaky`: a test that draws without a seed must pass on every draw, and a flake
that fails 1 run in 12 passes a single run most days.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--repeat", type=int, default=1, metavar="N", help="run each selected test N times")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    n = metafunc.config.getoption("repeat")
    if n > 1:
        metafunc.fixturenames.append("_repeat_run")
        metafunc.parametrize("_repeat_run", range(n), ids=[f"r{i}" for i in range(n)])
