"""Hypothesis profiles, in one place. Choose with --profile or ATTN_HARNESS_PROFILE.

dev:     quick local runs, random, with the example database.
ci:      derandomized, so the same commit draws the same cases on every machine.
nightly: many examples, for long runs off the critical path.
tpu:     for a TPU host, where each case is fast: more examples than dev.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE_ENV = "ATTN_HARNESS_PROFILE"
DEFAULT_PROFILE = "dev"

_common = {
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

PROFILES: dict[str, settings] = {
    "dev": settings(max_examples=10, **_common),
    "ci": settings(max_examples=20, derandomize=True, **_common),
    "nightly": settings(max_examples=500, **_common),
    "tpu": settings(max_examples=200, **_common),
}
for _name, _s in PROFILES.items():
    settings.register_profile(_name, _s)


def profile_name(requested: str | None = None) -> str:
    """The profile to use: the argument, else the environment variable, else dev."""
    name = requested or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)} (--profile or {PROFILE_ENV})")
    return name


def get(requested: str | None = None) -> settings:
    return PROFILES[profile_name(requested)]
