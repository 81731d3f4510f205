"""Smoke cases: before random generation, every declared mask component, dtype and tiling class,
every extreme-value regime, and every drawn API parameter, at the smallest size.

Hypothesis starts from the simplest cases, so a bug in one mask component can spend a
run's first cases on cases without it. A run therefore starts with a few explicit cases:
the i-th asks for the i-th mask component, the i-th tiling class and the i-th dtype at
once (cycling through the shorter lists), so max(len) cases cover every one of them.

Then the API cases: the drawn parameters of the wrapped API (harness.core.coverage) that no
case so far exercised, a scale, residuals, a soft cap, sinks, a fused backward, as many in
one case as the contract allows (a greedy cover over a fixed set of draws), so that a run of
a few cases (a matrix cell's) still exercises the whole declared API.

Each is the smallest case inside the kernel's contract that has those features, found by
Hypothesis's own `find` (derandomized: the same cases every run), never a hand-built case
that could drift out of the contract.

Finding them costs 1 to 16 CPU s per process (benchmarks/results/matrix_budget.json), paid again
by every worker of `run --jobs` and every run: the set a search takes (iter_smoke_cases) is kept
on disk beside JAX's compilation cache, keyed by everything the draw depends on (the kernel's
name, or a drop-in's built-in's, its adapter class and capabilities, the source of harness/core,
kernels/ and the adapter's module, the library versions), and found anew when any of them
changes or the file cannot be read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck, Phase, settings

from harness.core import coverage, emptygrads, features, strategies
from harness.core.case import EXTREME_REGIMES, Case, CaseError
from harness.core.contract import Implementation
from harness.core.inputs import empty_cotangent
from harness.core.masks import dense_mask, empty_rows
from harness.runtime import compat

# The groups smoke cases cover (harness.core.features), in the order their values are paired.
GROUPS = ("mask", "tiling", "dtype")
# Enough draws to meet a combination drawn one time in a few hundred; finding and shrinking
# the smoke set of pallas_flash takes a few CPU seconds, once per process.
FIND_SETTINGS = settings(
    database=None,
    derandomize=True,
    max_examples=1000,
    deadline=None,
    phases=(Phase.generate, Phase.shrink),
    suppress_health_check=list(HealthCheck),
)
# Draws the API cover picks its cases from: enough that a draw with several parameters at once
# (splash's soft cap, sinks, residuals and fused backward) is among them; a parameter none has
# gets a find of its own.
API_POOL = 200


def _order(group: str, values: tuple[str, ...]) -> list[str]:
    # Causal masks first (the most common source of kernel bugs), "none" last: it is the
    # default every other feature is drawn with anyway. Tiling classes finest first (an adapter
    # lists them coarse to fine, pallas_flash's one_tile .. several_minor), so the first case,
    # causal, is cut into the most tiles: it runs every path a single tile runs and those between
    # tiles (the online softmax's rescaling, accumulation across key steps, block offsets) at once.
    if group == "tiling":
        return sorted(reversed(values), key=lambda v: v == "one_tile")
    if group == "option":
        return sorted(values, key=lambda v: v == "none")  # "none" last, as for the masks
    if group != "mask":
        return list(values)
    return sorted(values, key=lambda v: (v == "none", not v.startswith("causal"), v))


def smallest(impl: Implementation, wanted: frozenset[str], unwanted: frozenset[str] = frozenset()) -> Case | None:
    """The smallest case of `impl` with every feature in `wanted` (harness.core.features; a family's name
    is had by a case with one of its members) and none in `unwanted`, found as the smoke cases are (Hypothesis's
    find, derandomized); None where no case in the contract has them all."""

    def wants(case: Case) -> bool:
        have = features.of(case, impl)
        return not unwanted & have and wanted <= features.with_families(impl, have)

    return _smallest_where(impl, wants)


def _smallest_where(impl: Implementation, condition: Callable[[Case], bool]) -> Case | None:
    try:
        return hypothesis.find(strategies.cases(impl), condition, settings=FIND_SETTINGS)
    except hypothesis.errors.NoSuchExample:
        return None


def smoke_cases(impl: Implementation) -> list[Case]:
    """The smoke set of `impl`: each declared mask component, tiling class and dtype in at least one
    case (feature_cases), each drawn API parameter those cases left unexercised (api_cases), each
    extreme-value regime (regime_cases), then the cotangent of rows that see no key (cotangent_cases)."""
    found = feature_cases(impl) + api_cases(impl) + regime_cases(impl)
    return found + cotangent_cases(impl, found)


def cotangent_cases(impl: Implementation, cases: list[Case]) -> list[Case]:
    """A case for each way rows that see no key are declared (mask form, row set, value, fill) that earlier
    ones were not, again with the next odd seed: those rows then get a cotangent (harness.core.inputs.
    empty_cotangent) and their gradients are judged against their declared value's (harness.core.emptygrads).
    Taken from `cases` through each form the kernel takes its mask in (Implementation.mask_forms); where none
    of `cases` has such rows, from the smallest case that has."""
    with_rows = [c for c in cases if _empty_ways(impl, c)]
    if not with_rows:
        first = _smallest_with_empty_rows(impl)
        with_rows = [first] if first is not None else []
    seen: set[tuple] = set()
    out: list[Case] = []
    for case in with_rows:
        for form, variant in impl.mask_forms(case).items():
            ways = {(form, *way) for way in _empty_ways(impl, variant)}
            if ways - seen and not impl.violations(variant):
                seen |= ways
                out.append(variant if empty_cotangent(variant) else variant.replace(seed=variant.seed + 1))
    return out


@functools.cache
def _smallest_with_empty_rows(impl: Implementation) -> Case | None:
    # Once per process: where no case has such rows, the find draws its whole budget in vain.
    return _smallest_where(impl, lambda c: bool(_empty_ways(impl, c)))


def _empty_ways(impl: Implementation, case: Case) -> set[tuple]:
    """The judged (row set, value, fill) of `case`'s rows that see no key under `impl`'s declarations."""
    shape = dict(batch=case.batch, heads=case.q_heads, q_len=case.q_len, kv_len=case.kv_len)
    empty = empty_rows(dense_mask(case.mask, **shape))
    if not empty.any():
        return set()
    return {(s.quantity, s.convention, s.fill) for s in emptygrads.declared(impl, case, empty) if s.judged}


def iter_smoke_cases(impl: Implementation) -> Iterator[Case]:
    """smoke_cases, one at a time: the API cases are looked for only once the feature cases are
    through, so a run that stops at a failing feature case never pays for them. Read from the
    disk cache where it holds this set (cache_path). What a run found is written there when it stops
    asking, whole or not: a run of a few cases keeps the cases it found, and the next run reads them,
    finding the rest (from the start: the set is one deterministic sequence) only if it asks for more."""
    path = cache_path(impl)
    cached, complete = _read(path) if path is not None else (None, False)
    if cached is not None:
        yield from cached
        if complete:
            return
    found: list[Case] = list(cached or ())
    whole = False
    try:
        for i, case in enumerate(_found(impl)):
            if i < len(found):
                continue  # read from the cache and yielded already
            found.append(case)
            yield case
        whole = True
    finally:
        if path is not None and (whole or len(found) > len(cached or ())) and not _holds_more(path, found):
            _write(path, found, complete=whole)


def _holds_more(path: Path, found: list[Case]) -> bool:
    """Whether the cache at `path` now holds more than `found` (another process wrote it meanwhile)."""
    now, complete = _read(path)
    return now is not None and (complete or len(now) > len(found))


def _found(impl: Implementation) -> Iterator[Case]:
    found: list[Case] = []
    for group in (feature_cases, api_cases, regime_cases):
        for case in group(impl):
            found.append(case)
            yield case
    yield from cotangent_cases(impl, found)


# What the draw depends on besides the kernel's name and capabilities: the strategies, masks,
# features and API tables (harness/core), the adapters and their shared helpers (kernels/).
_SOURCES = (Path(__file__).parent, Path(__file__).parent.parent.parent / "kernels")


@functools.cache
def _sources_digest() -> str:
    h = hashlib.sha256()
    for root in _SOURCES:
        for f in sorted(root.glob("*.py")):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def cache_path(impl: Implementation) -> Path | None:
    """Where `impl`'s smoke set is kept: in DIR-smoke beside JAX's compilation cache DIR (None when
    that is "off"), named by a hash of everything the set depends on."""
    base = compat.compilation_cache_dir()
    if base is None:
        return None
    h = hashlib.sha256(_sources_digest().encode())
    try:
        module = inspect.getsourcefile(type(impl))
        h.update(Path(module).read_bytes() if module else b"")
    except (OSError, TypeError):
        h.update(b"no source")
    versions = json.dumps(compat.library_versions(), sort_keys=True)
    # A drop-in (KERNEL=MODULE:ATTR) draws exactly what its built-in draws (same adapter class and, where
    # its function changes one, capabilities): keyed by the built-in's name, it shares the built-in's set.
    name = coverage.declaring_name(impl.name)
    caps = stable_repr(impl.capabilities)
    h.update(f"{name}\n{type(impl).__qualname__}\n{caps}\n{versions}\n{API_POOL}".encode())
    # Beside the compilation cache, named after it: a run given an empty cache gets an empty one of these too.
    return Path(base).parent / f"{Path(base).name}-smoke" / f"{h.hexdigest()[:32]}.json"


def stable_repr(x: object) -> str:
    """repr(x) with every set's members sorted: the same text in every process. A frozenset's repr
    follows its strings' hashes, which Python randomizes per process, so the capabilities' plain repr
    (mask components, restrictions) keyed the cache differently in most processes: measured, four
    processes gave four keys, and each found the smoke set anew (3 to 8 CPU s)."""
    if isinstance(x, (set, frozenset)):
        return "{" + ", ".join(sorted(stable_repr(v) for v in x)) + "}"
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = ", ".join(f"{f.name}={stable_repr(getattr(x, f.name))}" for f in dataclasses.fields(x))
        return f"{type(x).__qualname__}({fields})"
    if isinstance(x, dict):
        return "{" + ", ".join(sorted(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in x.items())) + "}"
    if isinstance(x, (list, tuple)):
        return type(x).__name__ + "(" + ", ".join(stable_repr(v) for v in x) + ")"
    return repr(x)


def _read(path: Path) -> tuple[list[Case] | None, bool]:
    """The cached set and whether it is the whole set; (None, False) when there is none or it cannot be read
    (then it is found anew). A file from before partial sets were kept is a whole set."""
    try:
        doc = json.loads(path.read_text())
        return [Case.from_json(c) for c in doc["cases"]], bool(doc.get("complete", True))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, CaseError):
        return None, False


def _write(path: Path, cases: list[Case], *, complete: bool = True) -> None:
    """Atomically (a concurrent worker reads a whole file or none); a cache that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"cases": [c.to_json() for c in cases], "complete": complete}, f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def feature_cases(impl: Implementation) -> list[Case]:
    """Each declared mask component, tiling class and dtype in at least one case, smallest first."""
    return list(_feature_cases(impl))


def regime_cases(impl: Implementation) -> list[Case]:
    """Each extreme-value regime (harness.core.case.EXTREME_REGIMES) once, smallest first."""
    return list(_regime_cases(impl))


def api_cases(impl: Implementation) -> list[Case]:
    """The drawn API parameters the feature cases left unexercised, as few cases as the greedy cover finds."""
    return list(_api_cases(impl))


@functools.cache
def _feature_cases(impl: Implementation) -> tuple[Case, ...]:
    declared = features.declared(impl)
    lists = [[f"{g}:{v}" for v in _order(g, declared[g])] for g in GROUPS if declared.get(g)]
    # The options (sinks, soft cap, residuals) advance once per round of the dtypes, so that each
    # meets every dtype while there are cases enough: a bug of an option in 16 bits (SPL-5, splash's
    # dsinks summed in bfloat16) needs the pair, and the options met float32 alone before.
    dtypes = len(declared.get("dtype", ())) or 1
    options = [f"option:{v}" for v in _order("option", declared.get("option", ()))]
    out: list[Case] = []
    for i in range(max(len(values) for values in lists)):
        wanted = frozenset(values[i % len(values)] for values in lists)
        wanted |= {options[(i // dtypes) % len(options)]} if options else set()
        # A causal case with equal lengths, the canonical causal mask: with fewer queries than keys
        # (top-left), the key tiles past the last query are masked for every query, and a kernel's
        # steps over them show nothing; unequal lengths are paired with the rest by the drawn cases.
        causal = any(w.startswith("mask:causal") for w in wanted)
        case = smallest(impl, wanted | {"lengths:equal"}) if causal else None
        case = case or smallest(impl, wanted)
        # A combination outside the contract (causal with q_len > kv_len on a kernel that
        # forbids it): each feature on its own instead.
        found = [case] if case is not None else [smallest(impl, frozenset({w})) for w in sorted(wanted)]
        out += [c for c in found if c is not None and c not in out]
    return tuple(out)


@functools.cache
def _regime_cases(impl: Implementation) -> tuple[Case, ...]:
    """The i-th extreme regime with the i-th declared mask component (causal first, as feature_cases
    orders them): a finite mask value shows only where a row's visible logits lie below it, so each
    regime meets a mask (the regime alone where the pair is outside the contract)."""
    masks = [f"mask:{m}" for m in _order("mask", features.declared(impl).get("mask", ()))] or [None]
    out: list[Case] = []
    for i, regime in enumerate(EXTREME_REGIMES):
        if regime not in impl.capabilities.regimes:
            continue  # never drawn (strategies.cases): its finds would draw their whole budget in vain
        wanted = frozenset({f"regime:{regime}", masks[i % len(masks)]} - {None})
        case = smallest(impl, wanted) or smallest(impl, frozenset({f"regime:{regime}"}))
        if case is not None and case not in out:
            out.append(case)
    return tuple(out)


def _draws(impl: Implementation) -> list[Case]:
    """API_POOL derandomized draws of `impl`'s cases: the pool the API cover picks from."""
    pool: list[Case] = []
    collect = settings(FIND_SETTINGS, max_examples=API_POOL, phases=(Phase.generate,))
    try:
        hypothesis.find(strategies.cases(impl), lambda c: pool.append(c) and False, settings=collect)
    except hypothesis.errors.NoSuchExample:
        pass
    return pool


@functools.cache
def _api_cases(impl: Implementation) -> tuple[Case, ...]:
    """Cases that exercise the drawn API parameters no feature case exercised, greedily: each the
    smallest case with the most of those parameters one draw of the pool had at once; then each
    parameter no draw had, on its own."""
    left = {
        f"{api.name}.{p.name}": p.exercised
        for api in coverage.apis_of(impl)
        for p in api.params
        if p.exercised is not None and not any(p.exercised(c) for c in _feature_cases(impl))
    }
    pool = _draws(impl) if left else []
    out: list[Case] = []
    while left:
        # The first draw with the most parameters still unexercised (the pool's order is fixed).
        best = max(pool, key=lambda c: sum(1 for f in left.values() if f(c)), default=None)
        wanted = [f for f in left.values() if best is not None and f(best)]
        if wanted:
            # Shrunk; find's own draws may miss what the pool had: then the drawn case as it is.
            case = _smallest_where(impl, lambda c, wanted=wanted: all(f(c) for f in wanted)) or best
        else:
            # No draw has any parameter left: the first of them on its own, if any case has it.
            first = left.pop(next(iter(left)))
            case = _smallest_where(impl, first)
            if case is None:
                continue  # no case exercises it: `python -m harness coverage` says so
        out.append(case)
        left = {name: f for name, f in left.items() if not f(case)}
    return tuple(out)
