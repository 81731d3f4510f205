"""Step one of the pipeline: Hypothesis draws cases for one kernel and shrinks any failure.

Every generated case is handed to `on_result` as it finishes. Cases tried while
shrinking are not; the minimal failing case is returned separately.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import hypothesis
from hypothesis import given, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from harness import profiles, strategies
from harness.contract import Implementation
from harness.runner import CaseResult, run_case


class CaseFailed(AssertionError):
    """Raised inside the Hypothesis test so that it shrinks the case."""


@dataclasses.dataclass
class SearchOutcome:
    kernel: str
    results: list[CaseResult]  # every generated case, in order
    shrunk: CaseResult | None = None  # the minimal failing case, if any
    interrupted: bool = False
    error: str | None = None  # a harness error that stopped the search

    @property
    def passed(self) -> bool:
        return self.shrunk is None and self.error is None and all(r.passed for r in self.results)


def search(
    kernel: Implementation,
    oracles: list[Implementation],
    *,
    examples: int | None = None,
    seed: int | None = None,
    profile: str | None = None,
    database: Path | None = None,
    grads: bool = True,
    on_result: Callable[[CaseResult], None] = lambda r: None,
) -> SearchOutcome:
    """Draw cases inside `kernel`'s contract and run each through the kernel and `oracles`."""
    outcome = SearchOutcome(kernel=kernel.name, results=[])
    subjects = [kernel, *oracles]
    state = {"failing": False, "last_failure": None}

    def check(case) -> None:
        result = run_case(case, subjects, grads=grads)
        if not state["failing"]:
            outcome.results.append(result)
            on_result(result)
        if not result.passed:
            state["failing"] = True
            state["last_failure"] = result
            raise CaseFailed(str(case))

    base = profiles.get(profile)
    overrides = {}
    if examples is not None:
        overrides["max_examples"] = examples
    if seed is not None:
        overrides["derandomize"] = False
    overrides["database"] = DirectoryBasedExampleDatabase(str(database)) if database else None
    test = settings(base, **overrides)(given(strategies.cases(kernel))(check))
    # Each kernel gets its own key in the example database.
    test.hypothesis.inner_test._hypothesis_internal_add_digest = kernel.name.encode()
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    try:
        test()
    except CaseFailed:
        # Hypothesis re-runs the minimal example last, so the last failure is the shrunk one.
        outcome.shrunk = state["last_failure"]
    except KeyboardInterrupt:
        outcome.interrupted = True
    except hypothesis.errors.Flaky as e:
        outcome.shrunk = state["last_failure"]
        outcome.error = f"flaky failure (did not reproduce on replay): {str(e).splitlines()[0]}"
    return outcome
