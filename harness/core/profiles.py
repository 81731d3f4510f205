"""Hypothesis profiles, in one place. Choose with --profile or ATTN_HARNESS_PROFILE.

dev:     local runs and `nox -s tpu` (50 cases: with compiled programs reused, about what
         10 cost before, README "Where a case's time goes"), random, with the example
         database (DIR/.hypothesis): a failure found once is replayed first next time on
         the same machine.
ci:      derandomized, so the same commit draws the same cases on every machine; no
         example database, which would make the draw depend on the machine's history.
nightly: many examples, for long runs off the critical path.
tpu:     for a TPU host, where each case is fast: more examples than dev.

Each profile also sets a shrink budget. Hypothesis would shrink for up to 500 steps or
300 s; under the interpreter one step runs a kernel for seconds, so the harness stops
running new shrink candidates after `runs` of them or `seconds`, and keeps the smallest
failing case found by then.
"""

from __future__ import annotations

import dataclasses
import os

from hypothesis import HealthCheck, Phase, settings

from harness.core.errors import InputError


class ProfileError(InputError):
    """An unknown Hypothesis profile name; the message lists the known ones."""


PROFILE_ENV = "ATTN_HARNESS_PROFILE"
DEFAULT_PROFILE = "dev"

_COMMON = {
    # A case runs a kernel under the interpreter for seconds; Hypothesis's per-example
    # deadline and speed health checks assume microseconds.
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.differing_executors,
    ],
    "report_multiple_bugs": False,
    "print_blob": False,
    # "explain" re-runs failing cases many times to annotate lines; too costly per case.
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
}

# Parent: Hypothesis's pristine defaults. Without it a profile inherits whatever profile is
# loaded at import time, and Hypothesis loads its own derandomized, database-free "ci"
# profile whenever the CI environment variable is set: dev would silently become ci there.
_DEFAULTS = settings.get_profile("default")
PROFILES: dict[str, settings] = {
    "dev": settings(_DEFAULTS, max_examples=50, derandomize=False, **_COMMON),
    "ci": settings(_DEFAULTS, max_examples=20, derandomize=True, **_COMMON),
    "nightly": settings(_DEFAULTS, max_examples=500, derandomize=False, **_COMMON),
    "tpu": settings(_DEFAULTS, max_examples=200, derandomize=False, **_COMMON),
}


@dataclasses.dataclass(frozen=True)
class ShrinkBudget:
    runs: int  # new cases run after the first failure (cases already run are free)
    seconds: float  # wall time after the first failure


# ci: about a minute of shrinking on an idle 2-core machine at ~3 s a case; the seconds
# only stop a shrink that is slower than that (a loaded machine, a time limit hit per case).
SHRINK_BUDGETS: dict[str, ShrinkBudget] = {
    "dev": ShrinkBudget(runs=60, seconds=600),
    "ci": ShrinkBudget(runs=20, seconds=300),
    "nightly": ShrinkBudget(runs=200, seconds=1800),
    "tpu": ShrinkBudget(runs=200, seconds=600),
}

for _name, _s in PROFILES.items():
    settings.register_profile(_name, _s)


def draw_no_local_constants() -> bool:
    """Make Hypothesis's draws depend on the strategies and the seed alone; True where it needed doing.

    Hypothesis (from 6.131, HypothesisWorks/hypothesis#4356) draws about one value in twenty from the
    literals of the first-party modules loaded so far (those outside site-packages: this checkout's
    harness, kernels and tests). A derandomized draw then depended on which modules a process had
    imported, and on every literal of every module anyone edited: measured, pallas_flash's smoke set
    differed between a process that had imported `harness` and one that had imported
    `harness.running.search`, and a find for a rarer combination succeeded in one and not the other.
    The harness promises the same cases for the same seed, commit and versions, in every process (the
    shards of `run --jobs`, `repro`, the tests), so the local pool stays empty; Hypothesis's own fixed
    constants are still drawn. A private hook, checked for before use: a Hypothesis without it has no
    local constants to turn off (the constraints pin the version, tests/test_profiles.py checks it)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        return False
    if not callable(getattr(providers, "_get_local_constants", None)) or not hasattr(providers, "Constants"):
        return False  # pragma: no cover - a Hypothesis before local constants
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if cache is not None and hasattr(cache, "cache"):
        cache.cache.clear()
    return True


draw_no_local_constants()


def profile_name(requested: str | None = None) -> str:
    """The profile to use: the argument, else the environment variable, else dev."""
    name = requested or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    if name not in PROFILES:
        raise ProfileError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)} (--profile or {PROFILE_ENV})")
    return name


def get(requested: str | None = None) -> settings:
    return PROFILES[profile_name(requested)]


def shrink_budget(requested: str | None = None) -> ShrinkBudget:
    return SHRINK_BUDGETS[profile_name(requested)]
