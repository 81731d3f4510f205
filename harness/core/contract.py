"""The one contract every kernel and oracle meets, and the registry that finds them.

An implementation is one module in `kernels/` or `oracles/` that builds an
`Implementation` and calls `register()`. The runner never names an implementation.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from harness.core.case import DTYPES, KV_FORMATS, REGIMES, Case
from harness.core.errors import InputError
from harness.core.masks import MASK_COMPONENTS, RESTRICTIONS

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from harness.core.coverage import Api
    from harness.core.inputs import Inputs

Role = Literal["kernel", "oracle"]
# How an implementation fills query rows that see no key:
#   zeros:   output 0 (SDPA's math path, the harness's own reference);
#   uniform: the plain average of every value row (a finite mask value on every key);
#   convex:  some average of value rows, finite and within their range, but which rows
#            depends on the kernel's tiling, so no exact value can be declared;
#   nan:     NaN;
#   nan_or_convex: per row, all NaN or "convex" (a kernel that skips key tiles: a row whose
#            tile visits none divides 0 by 0, one that visits some averages them);
#   unwritten: the kernel never writes these rows (a paged kernel skips a sequence of length
#            0): whatever the output buffer held. Declared, recorded, and not checked; under
#            the Pallas TPU interpreter's NaN fill the adapter declares "nan" instead.
EmptyRows = Literal["zeros", "uniform", "convex", "nan", "nan_or_convex", "unwritten"]
EMPTY_ROWS: tuple[str, ...] = ("zeros", "uniform", "convex", "nan", "nan_or_convex", "unwritten")
QUANTITIES: tuple[str, ...] = ("out", "dq", "dk", "dv", "dbias", "lse", "dsinks")
GRADIENTS: tuple[str, ...] = ("dq", "dk", "dv", "dbias", "dsinks")


class ContractError(ValueError):
    """A case outside an implementation's declared contract."""


class UnknownImplementation(InputError, LookupError):
    """A --kernel / --oracle name that no module registered and no MODULE:ATTR resolves."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What an implementation accepts; strategies draw only inside it.

    mask_components are the names from `Mask.components`, plus "bias" for an additive bias: what
    masks it is given. restrictions (harness.core.masks.RESTRICTIONS) are what it cannot take of
    them (one segment-id array for q and kv, causal only with q_len <= kv_len, ...).
    seq_lens and head_dims are the values a strategy draws from (all valid); q_lens, when
    given, are the query lengths drawn instead of seq_lens (a decode kernel's 1).
    kv_formats: K/V storage formats besides the case dtype (harness.core.case.KV_FORMATS).
    kv_format_only_dtypes: dtypes accepted only with one of kv_formats (a paged kernel whose plain
      pages of that dtype lose precision, where quantized pages do not).
    soft_cap, sinks, residuals: whether it takes a logits soft cap, attention sinks, and can
    return the logsumexp residual (harness.core.case.Case); strategies draw them only where True.
    tilings: the tiling classes its block strategy draws ("one_tile" first, when declared),
    as `Implementation.tiling` names them for a case (harness.core.features).
    `Implementation.violations` is the authoritative check.
    """

    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]
    seq_lens: tuple[int, ...]
    mask_components: frozenset[str]
    restrictions: frozenset[str] = frozenset()
    max_batch: int = 2
    max_kv_heads: int = 2
    max_group: int = 4  # q_heads per kv head
    unequal_lengths: bool = True
    grads: bool = True
    dbias: bool = True
    q_lens: tuple[int, ...] = ()
    kv_formats: tuple[str, ...] = ()
    tilings: tuple[str, ...] = ()
    soft_cap: bool = False
    sinks: bool = False
    residuals: bool = False
    kv_format_only_dtypes: tuple[str, ...] = ()
    # Any head_dim runs (an oracle on the dense mask): head_dims are then only what strategies draw.
    any_head_dim: bool = False
    # The value regimes (harness.core.case.REGIMES) it is held to; one left out cites its finding.
    regimes: tuple[str, ...] = REGIMES

    def __post_init__(self) -> None:
        stray = self.mask_components - MASK_COMPONENTS - {"bias"}
        if stray:
            raise ValueError(
                f"mask_components {sorted(stray)} are neither mask components nor bias; "
                f"a restriction goes in restrictions= (one of {RESTRICTIONS})"
            )
        if set(self.restrictions) - set(RESTRICTIONS):
            raise ValueError(
                f"restrictions {sorted(set(self.restrictions) - set(RESTRICTIONS))} are unknown; use {RESTRICTIONS}"
            )
        if self.kv_format_only_dtypes and not self.kv_formats:
            raise ValueError(f"kv_format_only_dtypes={self.kv_format_only_dtypes} needs kv_formats to draw from")


# What an oracle on the dense mask (harness.core.masks.dense_mask) accepts: every dtype, mask
# component and head_dim, bias, and quantized K/V (they arrive dequantized, harness.core.inputs).
# Soft cap, sinks, residuals and float64 are each oracle's own: dataclasses.replace adds them.
DENSE_ORACLE = Capabilities(
    dtypes=DTYPES,
    head_dims=(32, 64, 80, 128, 256),
    seq_lens=(16, 64, 128, 256),
    mask_components=frozenset(MASK_COMPONENTS | {"bias"}),
    kv_formats=KV_FORMATS,
    any_head_dim=True,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Conventions:
    """What an implementation does natively, and so what its adapter normalises.

    Every adapter presents the SDPA convention to the harness: softmax(QK^T*scale + bias)V,
    causal masks aligned as the case says, one head of k/v per q-head group.
    """

    bias: str  # native bias placement, e.g. "(QK^T + ab) * sm_scale"
    causal: str  # native causal alignment when q_len != kv_len
    gqa: str  # native GQA support, or how the adapter provides it
    empty_rows: EmptyRows  # see EmptyRows
    notes: str = ""
    # True where two runs of one case on fresh copies of its inputs return the same bits, outputs and
    # gradients (harness.running.determinism), else the reason they may not (atomics, a random order).
    reproducible: bool | str = True
    # True where a batch row's results are the same bits computed alone as in the whole batch, else why
    # not (then held to the tolerance instead) (harness.running.batch).
    batch_invariant: bool | str = True

    def __post_init__(self) -> None:
        for name in ("reproducible", "batch_invariant"):
            value = getattr(self, name)
            if value is not True and not (isinstance(value, str) and value):
                raise ValueError(f"Conventions.{name}={value!r} must be True or the reason it does not hold")

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(kw_only=True)
class Outputs:
    """Forward output and gradients as float64 numpy arrays (None where not computed).

    lse: the natural-log logsumexp of each query row's logits (sinks included),
    [batch, q_heads, q_len], when the case asks for residuals.
    dsinks: the gradient with respect to the sinks, [q_heads], when the case has sinks.
    """

    out: np.ndarray
    dq: np.ndarray | None = None
    dk: np.ndarray | None = None
    dv: np.ndarray | None = None
    dbias: np.ndarray | None = None
    lse: np.ndarray | None = None
    dsinks: np.ndarray | None = None

    def get(self, quantity: str) -> np.ndarray | None:
        return getattr(self, quantity)


class Implementation(abc.ABC):
    """One kernel or oracle. Subclasses set the class attributes and implement `run`."""

    name: str
    role: Role
    framework: str  # "jax" or "torch"
    capabilities: Capabilities
    conventions: Conventions
    description: str = ""
    # Every parameter of the public functions it wraps (harness.core.coverage), each drawn or said why not.
    api: tuple[Api, ...] = ()

    @abc.abstractmethod
    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:
        """Compute the case without any contract pre-check; raise if the code refuses it."""

    def backend(self) -> str:
        """Where this implementation executes: e.g. "tpu", "tpu_interpret", "cpu", "gpu"."""
        return "cpu"

    def device(self) -> str:
        """The device it computes on, as records show it: for JAX, the kernel device for kernels and
        the CPU for oracles (harness.core.placement); others override when they leave the CPU."""
        if self.framework != "jax":
            return "cpu"
        from harness.core import placement

        return placement.describe(placement.device_for(self.role))

    def empty_rows(self, case: Case) -> EmptyRows:
        """The declared behaviour on rows with no visible key, for this case."""
        return self.conventions.empty_rows

    def padded_rows(self, case: Case) -> EmptyRows:
        """The declared behaviour on padded query rows (at or past the row's valid query length,
        harness.core.masks.Lengths.q), for this case; by default the same as any row with no visible key."""
        return self.empty_rows(case)

    def jax_fn(self, case: Case) -> Callable[..., Any] | None:
        """A JAX function of the case's arrays (q, k, v[, bias]) returning the output, in the SDPA
        convention, for ahead-of-time compilation and timing; None when there is none (e.g. torch).

        Masks that are not arrays (causal, segment ids) are closed over from the case.
        """
        return None

    def dropin(self, fn: Callable[..., Any], *, name: str) -> Implementation:
        """This adapter around `fn`, a function with the signature of the one it wraps (`KERNEL=MODULE:ATTR`):
        by default the `dropin(fn, name=...)` of the module defining the adapter's class."""
        factory = getattr(importlib.import_module(type(self).__module__), "dropin", None)
        if factory is None:
            raise UnknownImplementation(f"built-in {self.name!r} accepts no drop-in function")
        return factory(fn, name=name)

    def cannot_run(self) -> str | None:
        """Why this implementation cannot run in this environment at all (the interpreter's own
        error), probed once on a small case; None when it runs. `run` records such a kernel as
        "cannot run here" (harness.core.exit_codes.EXIT_CANNOT_RUN), never as a pass."""
        return None

    def interpreters(self) -> tuple[str, ...]:
        """The interpreters (harness.core.compat.INTERPRETERS) it runs under here, each found by a
        probe; empty when it is not interpreted (it runs natively, or is no Pallas TPU kernel)."""
        return ()

    def tiling(self, case: Case) -> frozenset[str]:
        """The tiling classes (Capabilities.tilings) of the case's block sizes; empty when none are declared."""
        return frozenset()

    def block_strategy(self, case: Case) -> SearchStrategy[dict[str, int]] | None:
        """Tile sizes valid for this case's shape; None when the implementation has none."""
        return None

    def violations(self, case: Case) -> list[str]:
        """Why the case is outside the contract; empty when inside. Each names value and limit."""
        caps = self.capabilities
        out = []
        if case.dtype not in caps.dtypes:
            out.append(f"dtype={case.dtype} not in {caps.dtypes}")
        if not caps.any_head_dim and case.head_dim not in caps.head_dims:
            out.append(f"head_dim={case.head_dim} not in {caps.head_dims}")
        unsupported = (case.mask.components | ({"bias"} if case.bias else set())) - caps.mask_components
        if unsupported:
            out.append(f"mask components {sorted(unsupported)} not in {sorted(caps.mask_components)}")
        if not caps.unequal_lengths and case.q_len != case.kv_len:
            out.append(f"q_len={case.q_len} != kv_len={case.kv_len} is unsupported")
        if caps.q_lens and case.q_len not in caps.q_lens:
            out.append(f"q_len={case.q_len} not in {caps.q_lens}")
        if case.kv_format is not None and case.kv_format not in caps.kv_formats:
            out.append(f"kv_format={case.kv_format} not in {caps.kv_formats or '(none)'}")
        if case.regime not in caps.regimes:
            out.append(f"regime={case.regime} not in {caps.regimes}")
        if case.kv_format is None and case.dtype in caps.kv_format_only_dtypes:
            out.append(f"dtype={case.dtype} only with kv_format in {caps.kv_formats} (plain pages lose precision)")
        # residuals are not a violation: an implementation that returns none is simply not checked on them.
        for name in ("soft_cap", "sinks"):
            if getattr(case, name) not in (None, False) and not getattr(caps, name):
                out.append(f"{name}={getattr(case, name)} is not supported (Capabilities.{name} is False)")
        return out

    def check(self, case: Case) -> None:
        problems = self.violations(case)
        if problems:
            raise ContractError(f"{self.name}: case outside its contract: " + "; ".join(problems))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.role}, {self.framework})>"


_REGISTRY: dict[str, Implementation] = {}
_DISCOVERED: set[str] = set()  # packages whose every module was imported
# Packages whose every module is imported once so that it can register(); and, per role, the
# packages that register it: oracles register from oracles/ only, so names("oracle") is known
# without importing every kernel.
PACKAGES = ("kernels", "oracles")
PACKAGES_OF_ROLE: dict[str, tuple[str, ...]] = {"oracle": ("oracles",)}
# Frameworks an environment may lack (a matrix cell without torch, or with a jax older than
# tokamax needs, where it is not installed: harness.environments.matrix): a module that
# needs one is skipped, and `unavailable()` says which and why.
OPTIONAL_FRAMEWORKS = ("torch", "tokamax")
_UNAVAILABLE: dict[str, str] = {}


def register(impl: Implementation) -> Implementation:
    if impl.name in _REGISTRY and type(_REGISTRY[impl.name]) is not type(impl):
        raise ValueError(f"implementation name {impl.name!r} is registered twice")
    _REGISTRY[impl.name] = impl
    return impl


def _import(module: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in OPTIONAL_FRAMEWORKS:
            raise
        _UNAVAILABLE[module] = f"{e.name} is not installed"


def _discover(packages: tuple[str, ...] = PACKAGES) -> None:
    for pkg_name in packages:
        if pkg_name in _DISCOVERED:
            continue
        _DISCOVERED.add(pkg_name)
        pkg = importlib.import_module(pkg_name)
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                _import(f"{pkg_name}.{info.name}")


def _builtin(name: str) -> Implementation | None:
    """The built-in `name`, importing only its own module where one is named after it
    (kernels/pallas_flash.py registers pallas_flash): a run of one kernel does not pay for
    importing every other (tokamax, and the probes some adapters run at import, ~2 CPU s)."""
    if name not in _REGISTRY and name.isidentifier():
        for pkg_name in PACKAGES:
            if pkg_name not in _DISCOVERED and importlib.util.find_spec(f"{pkg_name}.{name}") is not None:
                _import(f"{pkg_name}.{name}")
    return _REGISTRY.get(name)


def unavailable() -> dict[str, str]:
    """Implementation modules skipped because an optional framework is missing: module -> why."""
    _discover()
    return dict(_UNAVAILABLE)


def registry() -> dict[str, Implementation]:
    """A copy of the registry, every module in kernels/ and oracles/ imported."""
    _discover()
    return dict(_REGISTRY)


def names(role: Role | None = None) -> list[str]:
    _discover(PACKAGES_OF_ROLE.get(role or "", PACKAGES))
    return sorted(n for n, i in _REGISTRY.items() if role is None or i.role == role)


def resolve(spec: str) -> Implementation:
    """A built-in name, `MODULE:ATTR`, or `KERNEL=MODULE:ATTR`.

    MODULE:ATTR may name an Implementation, or a drop-in function for a built-in kernel:
    `pallas_flash` by default, or the KERNEL named before `=`, whose `Implementation.dropin` wraps it.
    """
    builtin = _builtin(spec)
    if builtin is not None:
        return builtin
    base, _, target = spec.rpartition("=")
    if ":" not in target:
        reg = registry()
        if spec in reg:
            return reg[spec]
        raise UnknownImplementation(
            f"unknown implementation {spec!r}; use one of {sorted(reg)}, MODULE:ATTR, or KERNEL=MODULE:ATTR"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownImplementation(f"cannot import module {module_name!r} for {spec!r}: {e}") from None
    try:
        obj: Any = getattr(module, attr)
    except AttributeError:
        raise UnknownImplementation(f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(obj, Implementation):
        return obj
    if not callable(obj):
        raise UnknownImplementation(f"{target!r} is neither an Implementation nor a function")
    base = base or "pallas_flash"
    if _builtin(base) is None:
        raise UnknownImplementation(
            f"unknown built-in kernel {base!r} for drop-in {target!r}; known: {names('kernel')}"
        )
    return _REGISTRY[base].dropin(obj, name=spec)
